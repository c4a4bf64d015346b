"""The paper's metrics on constructed results whose answers are known."""

import math

import pytest

from cuda_agent.bench.metrics import compute_metrics, geomean
from cuda_agent.bench.paper import paper_metrics
from cuda_agent.bench.records import AttemptRecord, chosen_attempts
from tests.helpers import verdict


def rec(
    pid: str,
    level: int,
    correct: bool,
    eager: float | None = None,
    compile_: float | None = None,
    reward: float = 1.0,
    attempt: int = 0,
) -> AttemptRecord:
    result = {
        "correct": correct,
        "speedup_eager": eager if correct else None,
        "speedup_compile": compile_ if correct else None,
        "reward": reward if correct else -1.0,
    }
    return AttemptRecord(pid, level, attempt, "solutions", verdict(pid, **result))


RECORDS = [
    rec("a", 1, True, 2.0, 1.5, 3.0),
    rec("b", 1, True, 0.5, 0.25, 1.0),
    rec("c", 1, False),
    rec("d", 2, True, 4.0, 1.0, 2.0),
    rec("d", 2, True, 8.0, 2.0, 3.0, attempt=1),  # the better attempt is chosen
    rec("e", 2, False),
]


def test_overall_and_per_level_metrics() -> None:
    metrics = compute_metrics(chosen_attempts(RECORDS))
    overall, l1, l2 = metrics["overall"], metrics["levels"]["1"], metrics["levels"]["2"]
    assert overall["n"] == 5 and l1["n"] == 3 and l2["n"] == 2
    assert overall["pass_rate"] == pytest.approx(3 / 5)
    assert overall["faster_rate_eager"] == pytest.approx(2 / 5)  # a (2.0), d (8.0)
    assert overall["faster_rate_compile"] == pytest.approx(2 / 5)  # a (1.5), d (2.0)
    assert overall["geomean_speedup_eager"] == pytest.approx((2.0 * 0.5 * 8.0) ** (1 / 3))
    assert overall["geomean_speedup_compile"] == pytest.approx((1.5 * 0.25 * 2.0) ** (1 / 3))
    assert l1["pass_rate"] == pytest.approx(2 / 3) and l2["pass_rate"] == pytest.approx(1 / 2)
    assert overall["fast_p"] == {"0": 0.6, "0.8": 0.4, "1": 0.4, "1.5": 0.4, "2": 0.2}
    assert overall["mean_reward"] == pytest.approx((3 + 1 - 1 + 3 - 1) / 5)


def test_overall_is_weighted_by_level_size() -> None:
    metrics = compute_metrics(chosen_attempts(RECORDS))
    weighted = sum(m["pass_rate"] * m["n"] for m in metrics["levels"].values()) / 5
    assert metrics["overall"]["pass_rate"] == pytest.approx(weighted)


def test_speed_up_of_exactly_one_is_not_faster() -> None:
    metrics = compute_metrics(chosen_attempts([rec("x", 1, True, 1.0, 1.0)]))
    assert metrics["overall"]["faster_rate_eager"] == 0.0


def test_empty_and_degenerate_inputs() -> None:
    assert geomean([]) is None
    assert math.isclose(geomean([4.0, 1.0]) or 0, 2.0)
    metrics = compute_metrics({})
    assert metrics["overall"]["n"] == 0 and metrics["overall"]["pass_rate"] is None


def test_paper_table_row() -> None:
    cuda_agent = paper_metrics("CUDA Agent")
    assert cuda_agent["overall"]["faster_rate_compile"] == pytest.approx(0.968)
    assert cuda_agent["levels"]["3"]["geomean_speedup_compile"] == 1.52


def _flagged(record: AttemptRecord, flags: list[str] | None) -> AttemptRecord:
    record.result.problem_flags = flags
    return record


def test_metrics_over_the_problems_with_no_lint_flag() -> None:
    records = [
        _flagged(rec("a", 1, True, 2.0, 1.5, 3.0), ["constant_pass", "independent_of_inputs"]),
        _flagged(rec("b", 1, True, 0.5, 0.25, 1.0), []),
        _flagged(rec("c", 1, False), None),  # never linted: counted as unflagged
        _flagged(rec("d", 2, True, 4.0, 1.0, 2.0), ["zeros_pass"]),
    ]
    metrics = compute_metrics(chosen_attempts(records))
    assert metrics["overall"]["n"] == 4
    assert metrics["overall"]["pass_rate"] == pytest.approx(3 / 4)
    clean = metrics["no_lint_flag"]
    assert clean["overall"]["n"] == 2 and clean["overall"]["pass_rate"] == pytest.approx(1 / 2)
    assert clean["overall"]["geomean_speedup_eager"] == pytest.approx(0.5)
    assert list(clean["levels"]) == ["1"]  # level 2's only problem is flagged
    lint = metrics["problem_lint"]
    assert (lint["flagged"], lint["clean"], lint["unknown"]) == (2, 1, 1)
    assert lint["flagged_problems"] == {
        "a": ["constant_pass", "independent_of_inputs"],
        "d": ["zeros_pass"],
    }
