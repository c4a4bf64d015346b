"""Every bundled problem loads and runs on the cpu backend (in-process, through the worker code)."""

import json
import math
import re

import pytest

from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.worker.modes.problem_check import run as run_check_problem
from cuda_agent.evaluator.worker.protocol import EvalSettings, ResultChannel
from cuda_agent.problems.sets import bundled_entries, resolve_problem

NO_CHANNEL = ResultChannel(-1, "")  # a channel that sends nothing
SMALL_ELEMENTS = 1 << 22  # elements of a small-size problem's inputs and outputs, or weights


@pytest.mark.parametrize("problem_id", [e.id for e in bundled_entries()])
def test_bundled_problem_runs_on_cpu(problem_id: str) -> None:
    problem = resolve_problem(problem_id, size="small")
    request = worker_request("problem_check", EvalSettings(backend="cpu"), problem, seed=3)
    report = run_check_problem(request, NO_CHANNEL)
    assert report.ok, report
    assert report.warnings == [] and report.lint == []
    # the small size is for CPU runs: a bound on its data, not on a time
    assert elements(report.inputs) + elements(report.outputs) <= SMALL_ELEMENTS, report
    assert report.parameters <= SMALL_ELEMENTS and report.forward_ms >= 0


def elements(shapes: str) -> int:
    """Elements in ``describe_shapes`` text: ``[8, 64] float32, [64] float32`` -> 576."""
    return sum(math.prod(json.loads(part)) for part in re.findall(r"\[[0-9, ]*\]", shapes))
