"""End-to-end evaluations on the cpu backend: real builds, real worker processes, real verdicts."""

from pathlib import Path

import pytest

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options, relu_solution


def run(solution: Path, problem: str = "relu", **options: object):
    return evaluate(
        resolve_problem(problem, "small"), load_solution(solution), fast_options(**options)
    )


def test_correct_single_file_solution(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "return ops.relu_ok(x)"))
    assert result.error is None, result.error
    assert result.compiled and result.correct and result.flags == []
    assert result.reward >= 1
    assert result.runtime_us and result.eager_us and result.speedup_eager
    assert result.compile_us is None and result.speedup_compile is None
    trials = result.record.verify["trials"]
    assert len(trials) == 5 and all(t["ok"] for t in trials)
    assert result.record.verify["ops"] == {"empty_like": 5}
    shown = result.to_dict()  # the ``--json`` contract: the record's parts under ``details``
    assert set(shown["details"]) == DETAILS_OF_A_CORRECT_RESULT
    assert EvalResult.from_dict(shown).to_dict() == shown


# the keys ``details`` showed before the worker's record was carried whole (commit b164513)
DETAILS_OF_A_CORRECT_RESULT = {
    *("builds", "custom_calls_per_forward", "device", "device_budget_s", "isolation"),
    *("module_mode", "notes", "policy", "precision", "problem_hash", "reference_call_s"),
    *("seed", "size", "solution_hash", "solution_kind", "static_findings", "timing"),
    *("timings_s", "verify", "worker_phases_s", "worker_start"),
}


def test_wrong_solution_is_rejected_with_the_worst_element(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "return ops.relu_wrong(x)"))
    assert (result.compiled, result.correct, result.reward) == (True, False, -1.0)
    assert result.error is not None and result.error.stage == "verify"
    assert result.error.message.startswith("trial 1 of 5: output: ")
    assert "differ beyond atol=0.01, rtol=0.01" in result.error.message


def test_non_compiling_solution_reports_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(
        "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        "SRC = '''\nfloat twice(float x) {\n  return x * two;\n}\n'''\n"
        "ext = load_inline('ca_broken', SRC, functions=['twice'], no_implicit_headers=True)\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.twice(x)\n"
    )
    result = run(path)
    assert (result.compiled, result.correct, result.reward) == (False, False, -1.0)
    assert result.error is not None and result.error.stage == "build"
    assert "cpp_sources:3:" in result.error.message and "two" in result.error.message


@pytest.mark.slow
def test_crashing_extension_costs_one_evaluation(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "return ops.crash(x)"))
    assert (result.correct, result.reward) == (False, -1.0)
    assert result.error is not None and result.error.stage == "verify"
    assert "killed by SIGSEGV" in result.error.message
    assert "crashed" in result.flags
    again = run(relu_solution(tmp_path, "return ops.relu_ok(x)", name="good.py"))
    assert again.correct


@pytest.mark.slow
def test_hanging_kernel_is_killed_at_the_deadline(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "return ops.spin(x)"), worker_timeout_s=4.0)
    assert result.error is not None and "timed out" in result.error.message
    assert "timeout" in result.flags and result.reward == -1.0


@pytest.mark.slow
def test_python_exception_in_forward(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "raise ValueError('no kernel yet')"))
    assert result.error is not None and result.error.stage == "verify"
    assert "ValueError: no kernel yet" in result.error.message
    assert "solution.py:" in result.error.message


@pytest.mark.slow
def test_input_mutation_is_flagged(tmp_path: Path) -> None:
    result = run(relu_solution(tmp_path, "return ops.relu_and_zero_input(x)"))
    assert result.error is not None and "modified its inputs" in result.error.message
    assert "input_mutated" in result.flags


@pytest.mark.slow
def test_torch_compute_in_forward_violates_the_strict_policy(tmp_path: Path) -> None:
    path = relu_solution(tmp_path, "return torch.relu(x)")
    strict = run(path)
    assert strict.error is not None and "forbidden_op:relu" in strict.flags
    assert strict.reward == -1.0
    permissive = run(path, policy="off")
    assert permissive.correct and permissive.flags == []


def test_missing_model_new_is_a_static_verdict(tmp_path: Path) -> None:
    path = tmp_path / "nothing.py"
    path.write_text("import torch\nclass Model2: pass\n")
    result = run(path)
    assert result.error is not None and result.error.stage == "static"
    assert result.compiled is False and result.reward == -1.0


@pytest.mark.slow
def test_workdir_solution_and_build_cache() -> None:
    workdir = examples_root() / "bias_gelu_scale" / "cpu"
    first = run(workdir, problem="bias_gelu_scale")
    assert first.correct, first.error
    assert first.details.solution_kind == "workdir"
    second = run(workdir, problem="bias_gelu_scale")
    assert second.correct
    (build,) = [b for b in second.builds if b["module"] == "cuda_extension"][:1]
    assert build["cached"] is True and build["objects_built"] == 0


@pytest.mark.slow
def test_workdir_with_an_undefined_symbol_fails_at_build(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k_binding.cpp").write_text(
        '#include "binding_registry.h"\nextern "C" float ca_missing_launch(float);\n'
        'static void bind(pybind11::module_& m) { m.def("k", &ca_missing_launch); }\n'
        "REGISTER_BINDING(k, bind);\n"
    )
    (tmp_path / "model_new.py").write_text(
        "import torch.nn as nn\nimport cuda_extension\n"
        "class ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return cuda_extension.k(x)\n"
    )
    result = run(tmp_path)
    assert result.error is not None and result.error.stage == "build"
    assert "ca_missing_launch" in result.error.message


@pytest.mark.slow
def test_the_sandboxed_worker_reuses_the_parents_builds(tmp_path: Path) -> None:
    from cuda_agent.core.paths import cache_root
    from cuda_agent.evaluator.launch.worker_spawn import worker_sandbox

    policy = worker_sandbox("cpu", {}, tmp_path).policy
    assert policy.extra_env["CUDA_AGENT_CACHE"] == str(cache_root())  # HOME is moved in there
    result = run(relu_solution(tmp_path, "return ops.relu_ok(x)"))
    worker_builds = result.builds[1:]  # after the parent's own pre-build
    assert worker_builds and all(b["cached"] for b in worker_builds)
