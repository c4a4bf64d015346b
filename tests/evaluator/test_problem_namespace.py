"""A single-file solution and the problem's namespace (``PolicyRules.reference_namespace``).

KernelBench's evaluator executes the problem's file and then the solution in one dict, so a
solution may use ``Model``, the problem's imports and its globals without importing them.
Under ``kernelbench`` (and ``off``) the solution gets that namespace, from a second execution
of the problem's file; under ``strict`` it is a module of its own, and a name it took from the
problem's file is named in the verdict. Real evaluations on the cpu backend, the shared test
extension as the custom kernel.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.bench.agreement import our_reason
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import TEST_OPS_CPP, TEST_OPS_FUNCTIONS, fast_options

EXTENSION = (
    "from torch.utils.cpp_extension import load_inline\n\n"
    f"SOURCE = r'''{TEST_OPS_CPP}'''\n"
    f"ops = load_inline(name='ca_test_ops', cpp_sources=SOURCE, functions={TEST_OPS_FUNCTIONS!r})\n"
)

# `Model` (and through it nn and torch) taken from the problem's file, at import
SUBCLASS = (
    EXTENSION
    + """

class ModelNew(Model):
    def forward(self, x):
        return ops.relu_ok(x)
"""
)

# the problem's global `batch_size` used inside forward, at call time
GLOBAL_IN_FORWARD = (
    EXTENSION
    + """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.relu_ok(x) if batch_size else x
"""
)

# in KernelBench's one dict this rebinds the reference's own Model: the reference then
# computes the same wrong answer and the solution passes; here it changes the solution's copy
TAMPERS = (
    EXTENSION
    + """
import torch.nn as nn

Model.forward = lambda self, x: ops.relu_wrong(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.relu_wrong(x)
"""
)


def judge(tmp_path: Path, source: str, policy: str):
    path = tmp_path / f"{policy}.py"
    path.write_text(source)
    options = fast_options(policy=policy)
    return evaluate(resolve_problem("relu", "small"), load_solution(path), options)


@pytest.mark.parametrize("policy", ["kernelbench", "off"])
def test_the_problems_names_are_there_under_kernelbench(tmp_path: Path, policy: str) -> None:
    for source in (SUBCLASS, GLOBAL_IN_FORWARD):
        result = judge(tmp_path, source, policy)
        assert result.correct, (result.flags, result.error)


def test_strict_names_the_name_the_solution_took_from_the_problem(tmp_path: Path) -> None:
    result = judge(tmp_path, SUBCLASS, "strict")
    assert result.error is not None and result.error.stage == "load", result.error
    message = result.error.message
    assert "NameError" in message and "`Model` is defined by the problem's file" in message
    assert "kernelbench policy" in message
    # and a disagreement with KernelBench over it has its name in the agreement table
    assert our_reason(result).startswith("a name taken from the problem's file")
    result = judge(tmp_path, GLOBAL_IN_FORWARD, "strict")
    assert result.flags == ["forward_raised"], (result.flags, result.error)
    assert result.error is not None and "`batch_size` is defined by the problem's file" in (
        result.error.message
    )


def test_a_solution_cannot_rebind_the_reference_through_the_namespace(tmp_path: Path) -> None:
    result = judge(tmp_path, TAMPERS, "kernelbench")
    assert not result.correct and result.flags == ["output_mismatch:value"], (
        result.flags,
        result.error,
    )
