"""Problem flags on evaluations: the task lint, computed by the first evaluation's worker from
the reference it built, cached per problem content, and carried by every later result."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.checks import task_lint
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.loader import load_problem_file
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = pytest.mark.slow

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    \"\"\"{doc}\"\"\"
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        {body}

features = 16

def get_inputs():
    return [torch.randn(4, features)]

def get_init_inputs():
    return [features]
"""
# the shape of a CUDA-L1 problem: a min over channels, then a clamp to one value
CONSTANT = "y = torch.min(self.linear(x), dim=1, keepdim=True)[0]\n        return y.clamp(0.5, 0.5)"
CLEAN = "return torch.relu(self.linear(x))"


def _problem(tmp_path: Path, name: str, body: str):
    path = tmp_path / f"{name}.py"
    path.write_text(PROBLEM.format(doc=name, body=body))
    return load_problem_file(path)


def _as_solution(tmp_path: Path, problem_path: Path) -> Path:
    text = problem_path.read_text().replace("class Model(", "class ModelNew(")
    out = tmp_path / f"sol_{problem_path.name}"
    out.write_text(text)
    return out


def _eval(problem, solution: Path) -> EvalResult:
    return evaluate(problem, load_solution(solution), fast_options(policy="off"))


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))


def test_a_constant_problem_is_flagged_once_then_from_the_cache(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "min_clamp", CONSTANT)
    solution = _as_solution(tmp_path, problem.path)
    first = _eval(problem, solution)
    assert first.correct, first.error
    assert first.problem_flags is not None
    assert {"constant_pass", "independent_of_inputs"} <= set(first.problem_flags)
    assert any(w.startswith("degenerate problem (") for w in first.warnings)
    assert "problem_lint" in first.record.worker_phases_s  # linted in the worker
    assert first.to_dict()["problem_flags"] == first.problem_flags
    assert task_lint.cached_lint(problem, fast_options(policy="off")) is not None

    second = _eval(problem, solution)
    assert second.problem_flags == first.problem_flags
    assert "problem_lint" not in second.record.worker_phases_s  # from the cache
    assert second.details.problem_lint_s is None


def test_a_clean_problem_has_no_flags_and_no_warning(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "linear_relu", CLEAN)
    result = _eval(problem, _as_solution(tmp_path, problem.path))
    assert result.correct, result.error
    assert result.problem_flags == []
    assert not any("degenerate" in w for w in result.warnings)


def test_a_failure_before_the_worker_carries_the_cached_flags_or_none(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "min_clamp", CONSTANT)
    broken = tmp_path / "broken.py"
    broken.write_text("import torch.nn as nn\nclass ModelNew(nn.Module:\n    pass\n")
    unknown = _eval(problem, broken)
    assert unknown.error is not None and unknown.error.stage == "static"
    assert unknown.problem_flags is None  # nobody linted this problem yet
    _eval(problem, _as_solution(tmp_path, problem.path))
    known = _eval(problem, broken)
    assert known.error is not None and "constant_pass" in (known.problem_flags or [])


def test_the_cache_key_follows_what_decides_a_match(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "linear_relu", CLEAN)
    base = task_lint.cache_key(problem, fast_options())
    assert base == task_lint.cache_key(problem, fast_options(policy="off"))
    assert base != task_lint.cache_key(problem, fast_options(atol=1e-4))
    assert base != task_lint.cache_key(problem, fast_options(precision="tf32"))
    other = _problem(tmp_path, "min_clamp", CONSTANT)
    assert base != task_lint.cache_key(other, fast_options())


def test_a_single_trial_lints_in_part_and_caches_nothing(tmp_path: Path) -> None:
    problem = _problem(tmp_path, "min_clamp", CONSTANT)
    options = fast_options(policy="off", trials=1)
    result = evaluate(problem, load_solution(_as_solution(tmp_path, problem.path)), options)
    assert result.correct, result.error
    assert "constant_pass" in (result.problem_flags or [])
    assert "independent_of_inputs" not in (result.problem_flags or [])  # one input set only
    assert task_lint.cached_lint(problem, options) is None
