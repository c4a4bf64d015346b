"""``eval --shapes``: a kernel that hard-codes its size does not generalize; one that does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.checks.shapes import skip_reason
from cuda_agent.evaluator.pipeline import _finish, evaluate
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

FIXTURES = Path(__file__).parent / "fixtures"


def verdicts(result: EvalResult) -> dict[str, str]:
    return {s["label"]: s["verdict"] for s in result.details.shapes}


@pytest.mark.slow
def test_hard_coded_size_fails_larger_sizes() -> None:
    result = evaluate(
        resolve_problem("relu", "small"),
        load_solution(FIXTURES / "relu_hardcoded.py"),
        fast_options(shapes=True),
    )
    assert result.correct and result.error is None  # correct at the timed size
    assert result.generalizes is False
    assert verdicts(result) == {
        "base": "pass",
        "batch_size=8": "pass",  # 8 x 1024 fits in the hard-coded 16 x 1024
        "batch_size=32": "fail",
        "batch_size=17": "fail",
        "dim=512": "pass",
        "dim=2048": "fail",
        "dim=127": "pass",
    }
    failed = [s for s in result.details.shapes if s["verdict"] == "fail"]
    assert all(s["error"].startswith("verify: trial 1 of 5: output") for s in failed)
    assert failed[0]["sizes"] == {"batch_size": 32, "dim": 1024}
    assert failed[0]["inputs"] == [{"shape": [32, 1024], "dtype": "float32"}]
    assert result.reward >= 1  # never part of the reward unless asked
    assert result.details.timings_s["shapes"] > 0


@pytest.mark.slow
def test_general_kernel_generalizes() -> None:
    result = evaluate(
        resolve_problem("relu", "small"),
        load_solution(examples_root() / "relu" / "cpu.py"),
        fast_options(shapes=True),
    )
    assert result.correct and result.generalizes is True
    assert len(verdicts(result)) == 7 and set(verdicts(result).values()) == {"pass"}
    assert result.to_dict()["generalizes"] is True


def test_reward_counts_shapes_only_when_asked() -> None:
    def finished(**options: object) -> EvalResult:
        result = EvalResult("relu", "cpu", compiled=True, correct=True, generalizes=False)
        result.runtime_us, result.eager_us = 10.0, 20.0
        return _finish(result, fast_options(**options), None)

    assert finished(shapes=True).reward == 2
    assert finished(reward_shapes=True).reward == -1
    assert fast_options(reward_shapes=True).shapes  # --reward-shapes implies --shapes


def test_sizes_over_the_memory_bound_or_rejected_by_the_reference_are_skipped() -> None:
    plan = {"ok": True, "bytes": {"inputs": 2**30, "state": 0, "outputs": 2**30}}
    reason = skip_reason(plan, budget=8 * 2**30, trials=5)
    assert reason is not None and "needs about 9.00 GiB" in reason
    assert skip_reason(plan, budget=64 * 2**30, trials=5) is None
    assert "does not run at this size: boom" in str(
        skip_reason({"ok": False, "error": "boom"}, None, 5)
    )
    assert skip_reason({"ok": None}, None, 5) is None  # not described: run it
