"""Triton candidates on the GPU: an honest kernel scored with speed-ups, and the exploit
families the interpreter cannot run (a side stream, the autotuner's pre-hooks)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
pytest.importorskip("triton")

FIXTURES = Path(__file__).parent / "triton_fixtures"
HONEST = Path(__file__).parents[1] / "adversarial" / "fixtures" / "t_honest_relu.py"


def run(path: Path, **options: object):
    opts = EvalOptions(backend="cuda", **options).validate()  # type: ignore[arg-type]
    return evaluate(resolve_problem("relu", "standard"), load_solution(path), opts)


def test_an_honest_triton_kernel_is_scored_with_speed_ups() -> None:
    result = run(HONEST)
    assert result.correct and result.flags == [] and result.language == "triton", result.error
    assert result.reward >= 1 and result.speedup_eager and result.speedup_compile


def test_a_kernel_on_a_side_stream_is_rejected() -> None:
    result = run(FIXTURES / "t_side_stream.py", baselines=("eager",))
    assert not result.correct and "work_outside_timed_stream" in result.flags, result.flags


@pytest.mark.parametrize(
    ("policy", "flag"), [("strict", "forbidden_op:relu"), ("kernelbench", "custom_kernel_unused")]
)
def test_work_hidden_in_the_autotuners_pre_hook_is_rejected(policy: str, flag: str) -> None:
    result = run(FIXTURES / "t_autotune_hides_work.py", baselines=("eager",), policy=policy)
    assert not result.correct and flag in result.flags, (result.flags, result.error)
