"""The weight probe end to end (cpu backend, real worker processes, pure-PyTorch candidates under
``off``, so nothing is compiled): it passes honest renamed weights, catches a candidate whose
output ignores its weights, and guards the reference's weights while they are changed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = pytest.mark.slow

# bias_gelu_scale: Model(dim, scale_factor) holds one parameter, `bias`, drawn at construction
PROLOGUE = """
import gc
import torch
import torch.nn as nn
import torch.nn.functional as F

calls = 0


class ModelNew(nn.Module):
    def __init__(self, dim, scale_factor):
        super().__init__()
        self.shift = nn.Parameter(torch.empty(dim).uniform_(-1.0, 1.0))  # Model's bias, renamed
        self.scale_factor = scale_factor
        self.frozen = None

    def forward(self, x):
        global calls
        calls += 1
"""


def run(tmp_path: Path, body: str, policy: str = "off") -> EvalResult:
    path = tmp_path / "solution.py"
    path.write_text(PROLOGUE + textwrap.indent(textwrap.dedent(body), " " * 8))
    return evaluate(
        resolve_problem("bias_gelu_scale", "small"),
        load_solution(path),
        fast_options(policy=policy),
    )


def test_renamed_weights_that_are_used_pass_the_probe(tmp_path: Path) -> None:
    result = run(tmp_path, "return F.gelu(x + self.shift) * self.scale_factor")
    assert result.correct and result.flags == [], (result.error, result.flags)
    assert result.record.weight_probe == {"ran": True, "parameters": 1, "skipped": None}
    assert result.record.notes == ["weights_not_transferred"]


def test_a_copy_of_the_weights_frozen_on_the_first_call_is_caught(tmp_path: Path) -> None:
    body = """
    if self.frozen is None:
        self.frozen = [self.shift.detach().clone()]
    return F.gelu(x + self.frozen[0]) * self.scale_factor
    """
    result = run(tmp_path, body)
    assert not result.correct and result.flags == ["init_values_only"]
    assert result.error is not None and "does not follow its parameters" in result.error.message


def test_the_references_weights_are_guarded_while_they_are_changed(tmp_path: Path) -> None:
    body = """
    if calls == 6:  # the probe's call: change the reference's (new) weights, to be undone
        for obj in gc.get_objects():
            if isinstance(obj, nn.Module) and type(obj).__name__ == "Model":
                obj.bias.data.zero_()
    return F.gelu(x + self.shift) * self.scale_factor
    """
    result = run(tmp_path, body)
    assert not result.correct and "reference_weights_mutated" in result.flags
