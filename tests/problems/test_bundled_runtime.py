"""Every bundled problem loads and runs on the cpu backend (in-process, through the worker code)."""

import pytest

from cuda_agent.evaluator.worker.problem_check import run_check_problem
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.problems.sets import bundled_entries, resolve_problem


@pytest.mark.parametrize("problem_id", [e.id for e in bundled_entries()])
def test_bundled_problem_runs_on_cpu(problem_id: str) -> None:
    problem = resolve_problem(problem_id, size="small")
    request = WorkerRequest(
        mode="check_problem",
        nonce="",
        backend="cpu",
        problem_id=problem.id,
        problem_source=problem.source,
        seed=3,
    )
    report = run_check_problem(request)
    assert report["ok"], report
    assert report["warnings"] == [] and report["lint"] == []
    assert report["forward_ms"] < 500
