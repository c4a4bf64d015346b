"""The compatibility suite's plumbing on a tiny corpus of our own (never corpus code):
``prepare``, the ``kernelbench`` runner (parallel processes, resume, timeout, crash, deadline,
stock-build record), ``ours`` through the real ``bench run`` on the cpu backend, and ``table``.

KernelBench's evaluator needs a GPU, so the runner is exercised here against a small stand-in
KernelBench checkout (``STAND_IN``: the same module layout and ``eval_kernel_against_ref``
signature, evaluating on the CPU); the real one runs on the H200 (docs/compat.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from benchmarks.compat.corpus import prepare, read_manifest
from benchmarks.compat.kb_runner import RESULTS, KbConfig, latest_rows, run_kernelbench
from benchmarks.compat.table import markdown

from cuda_agent.bench.records import AttemptRecord, append_record
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.types import EvalResult, StageError
from cuda_agent.problems.sets import load_problem_set

REPO = Path(__file__).resolve().parents[2]

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn(4, 64)]

def get_init_inputs():
    return []
"""
SOLUTION = """
import torch
import torch.nn as nn
{prelude}
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        return {expr}
"""
# a solution that falls back to PyTorch when its extension fails to build (stock torch too)
FALLBACK_PRELUDE = """
from torch.utils.cpp_extension import load_inline
try:
    ext = load_inline("compat_fallback", "int broken( { return 0; }", functions=["broken"],
                      no_implicit_headers=True)
except Exception:
    ext = None
"""


def _row(level: int, task: int, expr: str, solution: str | None) -> dict[str, Any]:
    return {
        "level_id": level,
        "task_id": task,
        "ref_code": PROBLEM.format(expr=expr),
        "custom_code": solution,
        "score_default": 1.0,
    }


def _solution(expr: str, prelude: str = "", init: str = "pass") -> str:
    return SOLUTION.format(expr=expr, prelude=prelude, init=init)


CORPUS = [
    _row(1, 1, "torch.relu(x)", _solution("torch.relu(x)")),
    _row(1, 2, "x * 2", _solution("x * 2 + 3e-3")),  # within 1e-2, not within 1e-4
    _row(1, 3, "x + 1", _solution("x + 1", FALLBACK_PRELUDE)),
    _row(1, 4, "x - 1", _solution("x - 1", init="import time; time.sleep(120)")),
    _row(1, 5, "x * 3", _solution("x * 3", init="import os; os._exit(3)")),
    _row(2, 1, "x.sum(1)", None),
]

STAND_IN = {
    "__init__.py": "",
    "utils.py": "def set_gpu_arch(arch):\n    pass\n",
    "timing.py": "",
    "kernel_static_checker.py": "",
    "eval.py": """
import torch

class KernelExecResult:
    def __init__(self, compiled=False, correctness=False, metadata=None):
        self.compiled, self.correctness, self.metadata = compiled, correctness, metadata or {}

def get_tolerance_for_precision(precision):
    return 1e-4

def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42,
                            num_correct_trials=1, measure_performance=False, verbose=False,
                            build_dir=None, device=None, backend="cuda",
                            precision=torch.float32):
    ref = {}
    exec(original_model_src, ref)
    torch.manual_seed(seed_num)
    model = ref["Model"](*ref["get_init_inputs"]())
    new = {}
    try:
        exec(custom_model_src, new)
    except Exception as err:
        return KernelExecResult(False, False, {"compilation_error": str(err)})
    torch.manual_seed(seed_num)
    model_new = new["ModelNew"](*ref["get_init_inputs"]())
    tol = get_tolerance_for_precision(precision)
    for trial in range(num_correct_trials):
        torch.manual_seed(seed_num + trial)
        inputs = ref["get_inputs"]()
        a, b = model(*inputs), model_new(*inputs)
        if not torch.allclose(a, b, atol=tol, rtol=tol):
            diff = f"{(a - b).abs().max().item():.6f}"
            return KernelExecResult(True, False, {"correctness_issue": "Output mismatch",
                                                  "max_difference": [diff]})
    trials = f"({num_correct_trials} / {num_correct_trials})"
    return KernelExecResult(True, True, {"correctness_trials": trials})
""",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    return path


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    package = root / "src" / "kernelbench"
    package.mkdir(parents=True)
    for name, text in STAND_IN.items():
        (package / name).write_text(textwrap.dedent(text))
    level1 = root / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "1_ReLU.py").write_text("# names only\n")
    (level1 / "2_Scale.py").write_text("# names only\n")
    return root


def test_prepare_writes_a_problem_set_and_solutions(corpus: Path, kb: Path, tmp_path: Path) -> None:
    out = tmp_path / "set"
    manifest = prepare(corpus, out, kb)
    assert manifest["counts"] == {"solutions": 5, "no_solution": 1, "problem_rejected": 0}
    assert manifest["no_solution"] == ["L2_1"]
    ids = sorted(manifest["solutions"])
    assert ids == ["L1_1_ReLU", "L1_2_Scale", "L1_3", "L1_4", "L1_5"]  # KernelBench names
    problems = load_problem_set(str(out / "problems"))
    assert sorted(p.id for p in problems) == ids  # the ids our loader gives
    assert all(p.level == 1 for p in problems)
    assert sorted(f.stem for f in (out / "solutions").glob("*.py")) == ids
    assert read_manifest(out)["set"] == "tiny"

    plain = prepare(corpus, tmp_path / "plain", None, levels=(1,))
    assert sorted(plain["solutions"])[:2] == ["L1_1", "L1_2"] and plain["no_solution"] == []


def test_prepare_rejects_bad_rows_and_bad_problems(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"level_id": 1}) + "\n")
    with pytest.raises(CudaAgentError, match=r"bad.jsonl:1: not a corpus row"):
        prepare(bad, tmp_path / "out")
    broken = tmp_path / "broken.jsonl"
    row = _row(1, 7, "x", _solution("x"))
    row["ref_code"] = "import torch\nclass Model:\n    pass\n"  # no get_inputs
    broken.write_text(json.dumps(row) + "\n")
    manifest = prepare(broken, tmp_path / "out2")
    assert list(manifest["problem_rejected"]) == ["L1_7"] and not manifest["solutions"]


@pytest.mark.slow
def test_kernelbench_runner_resumes_and_names_failures(
    corpus: Path, kb: Path, tmp_path: Path
) -> None:
    set_dir = tmp_path / "set"
    prepare(corpus, set_dir, kb)
    config = KbConfig(kb=kb, jobs=3, timeout_s=30.0, trials=2, work_dir=tmp_path / "work")
    first = run_kernelbench(set_dir, config, only={"L1_1_ReLU", "L1_2_Scale", "L1_3", "L1_5"})
    assert first["this_call"] == 4 and first["left"] == 1
    rows = latest_rows(set_dir / RESULTS)
    assert rows["L1_1_ReLU"]["correctness"] is True
    assert rows["L1_1_ReLU"]["stock_build"] == "none"
    assert rows["L1_2_Scale"]["correctness"] is True  # within the 1e-2 it was asked for
    fallback = rows["L1_3"]
    assert fallback["correctness"] is True and fallback["compiled"] is True
    assert fallback["stock_build"] == "failed" and "error" in fallback["stock_build_error"]
    assert rows["L1_5"]["kind"] == "crash" and not rows["L1_5"]["correctness"]

    # the deadline: the slow one is killed and not recorded
    # (its own 30 s limit would record it as a timeout: nothing recorded means the deadline cut it)
    config.deadline, config.min_left_s = time.time() + 8, 1.0
    cut = run_kernelbench(set_dir, config)
    assert cut["this_call"] == 0 and cut["left"] == 1
    # its own time limit: recorded as a timeout
    config.deadline, config.timeout_s = None, 6.0
    again = run_kernelbench(set_dir, config)
    assert again["this_call"] == 1 and latest_rows(set_dir / RESULTS)["L1_4"]["kind"] == "timeout"

    native = KbConfig(kb=kb, tolerance=None, trials=2, work_dir=tmp_path / "work2")
    other = tmp_path / "native"
    prepare(corpus, other, kb)
    run_kernelbench(other, native, only={"L1_2_Scale"})
    scale = latest_rows(other / RESULTS)["L1_2_Scale"]
    assert scale["correctness"] is False and scale["kind"] == "mismatch"
    assert scale["max_difference"] == pytest.approx(3e-3, rel=0.01)


def _result(correct: bool, flags: list[str], error: tuple[str, str] | None) -> dict[str, Any]:
    result = EvalResult(problem_id="p", backend="cuda", compiled=True, correct=correct)
    result.flags = flags
    result.error = StageError(*error) if error else None
    result.problem_flags = ["constant_pass"] if correct else []
    return result.to_dict()


def test_table_joins_both_sides_per_set(corpus: Path, kb: Path, tmp_path: Path) -> None:
    set_dir = tmp_path / "h20"
    prepare(corpus, set_dir, kb)
    ours = {
        "L1_1_ReLU": _result(True, [], None),
        "L1_2_Scale": _result(False, ["output_mismatch:value"], ("verify", "trial 1 differs")),
        "L1_3": _result(False, ["build_failed"], ("build", "main.cpp:1:21: error: expected")),
        "L1_4": _result(False, ["no_custom_kernel"], ("verify", "no custom kernel ran")),
        "L1_5": _result(False, ["build_failed"], ("build", "main.cu:9:2: error: no")),
    }
    (set_dir / "ours").mkdir()
    for pid, result in ours.items():
        append_record(set_dir / "ours", AttemptRecord(pid, 1, 0, "solutions", result))
    theirs = [
        {"id": "L1_1_ReLU", "compiled": True, "correctness": True, "stock_build": "none"},
        {"id": "L1_2_Scale", "compiled": True, "correctness": True, "stock_build": "none"},
        {"id": "L1_3", "compiled": True, "correctness": True, "stock_build": "failed"},
        {"id": "L1_4", "compiled": True, "correctness": True, "stock_build": "none"},
        {
            "id": "L1_5",
            "compiled": True,
            "correctness": False,
            "kind": "mismatch",
            "stock_build": "ok",
        },
    ]
    (set_dir / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in theirs))
    empty = tmp_path / "a100"
    prepare(corpus, empty, kb)

    text = markdown([set_dir, empty])
    assert "| h20 | 5 | 5 | 2 | 1 | 1 | 0 | 3 | 1 | 4 | 0 | 1 |" in text
    # both reject, but ours for a build failure stock torch did not have
    assert (
        "| h20 | L1_5 | rejected (mismatch) | rejected (build) | build_failed | - | false build"
        in text
    )
    assert "| a100 | 5 | 0 |" in text
    assert "| numerics beyond tolerance | 1 | 0 | 1 |" in text
    assert "| no custom kernel ran | 1 | 0 | 1 |" in text
    reason = "fails to build with stock torch too (fallback reported as a build error)"
    assert f"| {reason} | 1 | 0 | 1 |" in text
    assert "| h20 | L1_3 | correct | rejected (build) | build_failed | - |" in text
    assert "- h20 L1_1_ReLU: constant_pass" in text  # correct on a degenerate problem

    cli = subprocess.run(
        [sys.executable, "-m", "benchmarks.compat", "table", str(set_dir), "--out", "t.md"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / "t.md").read_text() == markdown([set_dir])
    missing = subprocess.run(
        [sys.executable, "-m", "benchmarks.compat", "table", str(tmp_path / "nothing")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert missing.returncode == 2 and "run `prepare` first" in missing.stderr


@pytest.mark.slow
def test_ours_runs_bench_over_the_set_and_sums_its_segments(corpus: Path, tmp_path: Path) -> None:
    set_dir = tmp_path / "set"
    small = tmp_path / "small.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in CORPUS[:2]))
    prepare(small, set_dir)
    env = {"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"}
    env["CUDA_AGENT_CACHE"] = str(tmp_path / "cache")
    command = [sys.executable, "-m", "benchmarks.compat", "ours", str(set_dir)]
    out = subprocess.run(
        [*command, "--backend", "cpu", "--policy", "off", "--seconds", "400"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["verdicts"] == 2 and summary["without_verdict"] == []
    assert summary["counts"] == {"correct": 2}  # 3e-3 off is within our 1e-2
    assert summary["segments"] == 1 and summary["wall_s"] > 0


@pytest.mark.slow  # runs the KernelBench runner
def test_kernelbench_runner_stops_at_once_without_a_usable_checkout(
    corpus: Path, kb: Path, tmp_path: Path
) -> None:
    set_dir = tmp_path / "set"
    prepare(corpus, set_dir, kb)
    with pytest.raises(CudaAgentError, match="not a KernelBench checkout"):
        run_kernelbench(set_dir, KbConfig(kb=tmp_path / "nowhere", work_dir=tmp_path / "w"))
    (kb / "src" / "kernelbench" / "timing.py").unlink()
    with pytest.raises(CudaAgentError, match="does not import"):
        run_kernelbench(set_dir, KbConfig(kb=kb, work_dir=tmp_path / "w"))
    assert not (set_dir / RESULTS).exists()  # no verdict was recorded
