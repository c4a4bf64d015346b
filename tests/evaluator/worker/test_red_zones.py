"""The guarded trial's buffers (``worker/red_zones.py``) and the call that tells a read past an
input's edge from a wrong answer.

The evaluation test runs the real cpu worker on a pure-torch candidate (policy ``off``) that
reads one element past its input wherever the input's storage goes on: it models what the H200
showed on 2026-12-05, where the memory next to a fresh copy made after the guarded trial held
NaN (the caching allocator's recycled blocks), so a second call on plain copies failed alike
and the read was named ``output_mismatch:nan``.

The second models the CI machine of 2026-12-06: a read past the end of a plain copy (a trial
before the guarded one) found NaN in the allocator's slack, and the verdict was
``output_mismatch:nan`` where the guarded trial would have named it ``memory_error:access``.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.worker.red_zones import guard_inputs
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

PEEKING = '''
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """ReLU that adds 0 * (the element just past its input). Where the input's storage ends at
    its edge, the neighbour is what an allocator left there: finite before the guarded trial,
    NaN after it (the H200's recycled blocks)."""

    after_guarded = False

    def forward(self, x):
        y = torch.relu(x)
        end = x.storage_offset() + x.numel()
        if x.untyped_storage().nbytes() // x.element_size() > end:
            beyond = torch.as_strided(x, (1,), (1,), end)
            if torch.isnan(beyond).any():
                type(self).after_guarded = True
            return y + 0.0 * beyond
        return y + (math.nan if type(self).after_guarded else 0.0)
'''

NAN_SLACK = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    \"\"\"ReLU that adds 0 * (the element just past its input). Inside a larger buffer it reads
    the real neighbour; on a plain copy (storage ending at the input's edge) it adds what an
    allocator whose slack holds NaN would give: NaN, in every trial before the guarded one.\"\"\"

    def forward(self, x):
        y = torch.relu(x)
        end = x.storage_offset() + x.numel()
        if x.untyped_storage().nbytes() // x.element_size() > end:
            return y + 0.0 * torch.as_strided(x, (1,), (1,), end)
        return y + float("nan")
"""

VerifyError = tuple[str, list[str]]  # the error's message, the result's flags


def past_end(view: torch.Tensor) -> float:
    return float(torch.as_strided(view, (1,), (1,), view.storage_offset() + view.numel()))


def before_start(view: torch.Tensor) -> float:
    return float(torch.as_strided(view, (1,), (1,), view.storage_offset() - 1))


def test_the_trial_edges_hold_nan_and_the_second_calls_hold_zeros() -> None:
    x = torch.randn(8, 16)
    (trial,), guarded = guard_inputs([x])
    assert torch.equal(trial, x) and math.isnan(past_end(trial)) and math.isnan(before_start(trial))
    (second,), zeroed = guard_inputs([x], fill=0)
    assert torch.equal(second, x) and past_end(second) == 0.0 and before_start(second) == 0.0
    assert guarded[0].guards_intact() and zeroed[0].guards_intact()
    torch.as_strided(second, (1,), (1,), second.storage_offset() + second.numel()).fill_(1.0)
    assert not zeroed[0].guards_intact()  # a write past the end is seen with either fill


def rejected_at_verify(tmp_path: Path, source: str) -> VerifyError:
    """The verdict of the cpu worker on ``source`` as ModelNew for ``relu`` (policy ``off``):
    it must fail at ``verify``; its error and flags."""
    path = tmp_path / "model_new.py"
    path.write_text(source)
    result = evaluate(
        resolve_problem("relu", "small"), load_solution(path), fast_options(policy="off")
    )
    assert result.error is not None and result.error.stage == "verify", result.error
    return result.error.message, result.flags


def test_a_read_past_the_end_is_named_whatever_lies_next_to_a_fresh_copy(tmp_path: Path) -> None:
    message, flags = rejected_at_verify(tmp_path, PEEKING)
    assert flags == ["memory_error:access"], (flags, message)


def test_a_read_past_the_end_that_fails_a_plain_trial_is_named_alike(tmp_path: Path) -> None:
    message, flags = rejected_at_verify(tmp_path, NAN_SLACK)
    assert message.startswith("trial 1"), message  # a plain trial
    assert flags == ["memory_error:access"], (flags, message)


RECYCLED_SCRATCH = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    \"\"\"ReLU plus 0 * a scratch it never writes, modelling the H100's recycled blocks
    (2026-12-06): the scratch holds NaN in the first two calls (the failing trial, then the call
    on NaN-edged copies: the freed guard bytes) and something finite in the third, unless the
    harness filled uninitialised memory (then it is NaN, as torch.empty gives it).\"\"\"

    calls = 0

    def forward(self, x):
        type(self).calls += 1
        scratch = torch.empty(1)
        if type(self).calls <= 2:
            scratch.fill_(float("nan"))  # what the recycled block held
        elif not torch.isnan(scratch).all():
            scratch.zero_()  # a finite leftover, as on the GPU; a filled NaN stays
        return torch.relu(x) + 0.0 * scratch
"""


def test_an_uninitialised_scratch_is_not_named_a_read_past_the_edge(tmp_path: Path) -> None:
    message, flags = rejected_at_verify(tmp_path, RECYCLED_SCRATCH)
    assert message.startswith("trial 1"), message
    assert flags == ["output_mismatch:nan"], (flags, message)
