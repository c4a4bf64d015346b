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
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult
from cuda_agent.problems.sets import load_problem_set
from tests.helpers import verdict

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
import os
import torch

CALLS = []  # one entry per eval_kernel_against_ref call in this process

class KernelExecResult:
    def __init__(self, compiled=False, correctness=False, metadata=None):
        self.compiled, self.correctness, self.metadata = compiled, correctness, metadata or {}

def get_tolerance_for_precision(precision):
    return 1e-4

def load_original_model_and_inputs(model_original_src, context):
    exec(model_original_src, context)
    return context["Model"], context["get_init_inputs"], context["get_inputs"]

def eval_kernel_against_ref(original_model_src, custom_model_src, seed_num=42,
                            num_correct_trials=1, measure_performance=False, verbose=False,
                            build_dir=None, device=None, backend="cuda",
                            precision=torch.float32):
    CALLS.append(get_tolerance_for_precision(precision))
    Model, get_init_inputs, get_inputs = load_original_model_and_inputs(original_model_src, {})
    torch.manual_seed(seed_num)
    model = Model(*get_init_inputs())
    new = {}
    try:
        exec(custom_model_src, new)
    except Exception as err:
        return KernelExecResult(False, False, {"compilation_error": str(err)})
    torch.manual_seed(seed_num)
    model_new = new["ModelNew"](*get_init_inputs())
    meta = {"call": len(CALLS), "pid": os.getpid()}
    try:  # as KernelBench: the reference's own error lands here, with no traceback
        return check(model, model_new, get_inputs, num_correct_trials, seed_num, precision, meta)
    except Exception as err:
        meta.update(runtime_error=str(err), runtime_error_name=type(err).__name__)
        return KernelExecResult(True, False, meta)

def check(model, model_new, get_inputs, trials, seed, precision, meta):
    tol = get_tolerance_for_precision(precision)
    for trial in range(trials):
        torch.manual_seed(seed + trial)
        inputs = [x.to(dtype=precision) for x in get_inputs()]  # as KernelBench: every input
        a = model(*inputs)
        try:
            b = model_new(*inputs)
        except Exception as err:
            meta.update(runtime_error=str(err), runtime_error_traceback="Traceback ...")
            return KernelExecResult(True, False, meta)
        if not torch.allclose(a, b, atol=tol, rtol=tol):
            meta.update(correctness_issue="Output mismatch")
            meta["max_difference"] = [f"{(a - b).abs().max().item():.6f}"]
            return KernelExecResult(True, False, meta)
    meta["correctness_trials"] = f"({trials} / {trials})"
    return KernelExecResult(True, True, meta)
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
    # and the verdict at KernelBench's tolerance of today, from the same evaluation
    assert rows["L1_2_Scale"]["correct_at"] == {"0.01": True, "0.0001": False}
    assert rows["L1_2_Scale"]["max_difference_at"]["0.0001"] == pytest.approx(3e-3, rel=0.01)
    assert rows["L1_1_ReLU"]["correct_at"] == {"0.01": True, "0.0001": True}
    fallback = rows["L1_3"]
    assert fallback["correctness"] is True and fallback["compiled"] is True
    assert fallback["stock_build"] == "failed" and "error" in fallback["stock_build_error"]
    assert fallback["correct_at"] == {"0.01": True, "0.0001": True}
    assert rows["L1_5"]["kind"] == "crash" and not rows["L1_5"]["correctness"]
    assert rows["L1_5"]["correct_at"] == {"0.01": False, "0.0001": False}

    # the deadline: the slow one is killed and not recorded
    # (its own 30 s limit would record it as a timeout: nothing recorded means the deadline cut it)
    config.deadline, config.min_left_s = time.time() + 8, 1.0
    cut = run_kernelbench(set_dir, config)
    assert cut["this_call"] == 0 and cut["left"] == 1
    # its own time limit: recorded as a timeout
    config.deadline, config.timeout_s = None, 6.0
    again = run_kernelbench(set_dir, config)
    assert again["this_call"] == 1 and latest_rows(set_dir / RESULTS)["L1_4"]["kind"] == "timeout"

    # a first attempt that ran out of GPU memory, its call cut before the retry: the next call
    # evaluates it again, alone, after any new ones (attempt 2), and that row is its verdict
    oom = {**rows["L1_1_ReLU"], "attempt": 1, "correctness": False, "kind": "runtime"}
    oom["error"] = "CUDA out of memory. Tried to allocate 6.00 GiB."
    with (set_dir / RESULTS).open("a") as handle:
        handle.write(json.dumps(oom) + "\n")
    retried = run_kernelbench(set_dir, config)
    assert retried["this_call"] == 1
    relu = latest_rows(set_dir / RESULTS)["L1_1_ReLU"]
    assert relu["attempt"] == 2 and relu["correctness"] is True
    assert run_kernelbench(set_dir, config)["this_call"] == 0  # retried once, not again

    native = KbConfig(kb=kb, tolerances=(None,), trials=2, work_dir=tmp_path / "work2")
    other = tmp_path / "native"
    prepare(corpus, other, kb)
    run_kernelbench(other, native, only={"L1_2_Scale"})
    scale = latest_rows(other / RESULTS)["L1_2_Scale"]
    assert scale["correctness"] is False and scale["kind"] == "mismatch"
    assert scale["max_difference"] == pytest.approx(3e-3, rel=0.01)
    assert "correct_at" not in scale and scale["tolerance"] is None  # one tolerance: as before


# a problem whose reference needs integer class targets: KernelBench casts every input to the
# float precision, so its own reference raises before any solution runs
TARGETS_PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, t):
        return torch.nn.functional.cross_entropy(x, t).reshape(1)

def get_inputs():
    return [torch.randn(4, 8), torch.randint(0, 8, (4,))]

def get_init_inputs():
    return []
"""
TARGETS_SOLUTION = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x, t):
        return torch.nn.functional.cross_entropy(x, t.long()).reshape(1)
"""


def _kb_worker(kb: Path, work: Path, ref: str, cand: str, tolerances: list[Any]) -> dict:
    """One run of the KernelBench worker process, as the runner starts it; its result."""
    work.mkdir(parents=True)
    payload = {"kb": str(kb), "ref_src": ref, "cand_src": cand, "trials": 2}
    payload |= {"tolerances": tolerances, "gpu_arch": "none", "device": "cpu"}
    payload |= {"build_dir": str(work / "build"), "backend": "cuda"}
    (work / "payload.json").write_text(json.dumps(payload))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.compat.kb_worker", "payload.json", "result.json"],
        cwd=work,
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((work / "result.json").read_text())


@pytest.mark.slow  # KernelBench's worker processes
def test_one_kernelbench_process_gives_the_verdict_at_each_tolerance(
    kb: Path, tmp_path: Path
) -> None:
    """The loosest first; while correct, each stricter one in the same process (the stand-in
    counts its calls and says its process); a stricter one after a failure is implied."""
    ref = PROBLEM.format(expr="x * 2")
    scale = _kb_worker(kb, tmp_path / "a", ref, _solution("x * 2 + 3e-3"), [1e-2, 1e-4])
    loose, strict = scale["kb_results"]["0.01"], scale["kb_results"]["0.0001"]
    assert loose["correctness"] and not strict["correctness"]
    assert (loose["metadata"]["call"], strict["metadata"]["call"]) == (1, 2)
    assert loose["metadata"]["pid"] == strict["metadata"]["pid"]
    assert scale["kb_result"] == loose and scale["implied"] == [] and not scale["partial"]

    wrong = _kb_worker(kb, tmp_path / "b", ref, _solution("x * 2 + 0.5"), [1e-2, 1e-4])
    assert wrong["implied"] == ["0.0001"]  # wrong at 1e-2: not run again at 1e-4
    assert wrong["kb_results"]["0.0001"]["metadata"]["call"] == 1

    # the primary can be the stricter one: still the loosest first; native is KernelBench's own
    flipped = _kb_worker(kb, tmp_path / "c", ref, _solution("x * 2"), [1e-4, 1e-2, None])
    assert flipped["kb_results"]["0.01"]["metadata"]["call"] == 1
    assert flipped["kb_results"]["0.0001"]["metadata"]["call"] == 2
    assert flipped["kb_results"]["native"] == flipped["kb_results"]["0.0001"]  # 1e-4: once
    assert flipped["kb_result"] == flipped["kb_results"]["0.0001"]
    assert flipped["reference_errors"] == [] and flipped["stock_builds"] == []


@pytest.mark.slow  # KernelBench's worker processes
def test_kernelbench_reference_failing_on_its_own_inputs_is_recorded(
    corpus: Path, kb: Path, tmp_path: Path
) -> None:
    out = _kb_worker(kb, tmp_path / "w", TARGETS_PROBLEM, TARGETS_SOLUTION, [1e-2])
    (error,) = out["reference_errors"]
    assert error.startswith("Model.forward raised RuntimeError: expected target dtype")
    # KernelBench's own record: a runtime error with no traceback, as ModelNew(...) raising
    metadata = out["kb_result"]["metadata"]
    assert "runtime_error" in metadata and "runtime_error_traceback" not in metadata

    rows = [
        _row(1, 1, "x * 2", _solution("x * 2")),
        {**_row(1, 2, "x", None), "ref_code": TARGETS_PROBLEM, "custom_code": TARGETS_SOLUTION},
    ]
    small = tmp_path / "targets.jsonl"
    small.write_text("".join(json.dumps(r) + "\n" for r in rows))
    set_dir = tmp_path / "set"
    prepare(small, set_dir, kb)
    run_kernelbench(set_dir, KbConfig(kb=kb, jobs=2, trials=2, work_dir=tmp_path / "work"))
    verdicts = latest_rows(set_dir / RESULTS)
    assert verdicts["L1_2_Scale"]["kind"] == "runtime"
    assert verdicts["L1_2_Scale"]["reference_error"].startswith("Model.forward raised")
    assert verdicts["L1_2_Scale"]["correct_at"] == {"0.01": False, "0.0001": False}
    assert "reference_error" not in verdicts["L1_1_ReLU"]


WATCH_PROBE = """
import sys
import torch.utils.cpp_extension as ext
from benchmarks.compat.kb_worker import watch_builds

compiled = []
def stock_load_inline(name, sources, **kw):  # stands in for torch's: a build that fails
    compiled.append(name)
    raise RuntimeError("Error building extension 'bad': x.cpp:1:1: error: expected ';'")

ext.load_inline = stock_load_inline
record = []
watch_builds(record)
for _ in range(2):  # the solution re-executed, as the stricter tolerance's evaluation does
    try:
        ext.load_inline("bad", "int x(")
    except RuntimeError as err:
        assert "expected ';'" in str(err)
print(len(compiled), len(record), record[0]["ok"], record[0]["error"])
"""


def test_a_failed_stock_build_raises_its_first_error_again_for_a_stricter_tolerance() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WATCH_PROBE],
        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[:3] == ["1", "1", "False"]  # built once, its error raised twice


def test_table_gives_agreement_at_each_tolerance_and_names_the_new_classes(
    corpus: Path, kb: Path, tmp_path: Path
) -> None:
    """Recorded rows: verdicts at both tolerances, a reference that fails on KernelBench's
    inputs, and an older row without ``correct_at`` (still read)."""
    set_dir = tmp_path / "h20"
    prepare(corpus, set_dir, kb)
    ours = {
        "L1_1_ReLU": _result(True, [], None),
        "L1_2_Scale": _result(True, [], None),
        "L1_3": _result(True, [], None),
        "L1_4": _result(True, [], None),
        "L1_5": _result(False, ["output_mismatch:value"], ("verify", "trial 1 differs")),
    }
    (set_dir / "ours").mkdir()
    for pid, result in ours.items():
        append_record(
            set_dir / "ours", AttemptRecord(pid, 1, 0, "solutions", verdict(pid, **result))
        )
    both = {"tolerance": 0.01, "tolerances": [0.01, 0.0001], "stock_build": "none"}
    theirs = [
        {"id": "L1_1_ReLU", "compiled": True, "correctness": True, **both}
        | {"correct_at": {"0.01": True, "0.0001": True}, "implied_at": []},
        {"id": "L1_2_Scale", "compiled": True, "correctness": True, **both}
        | {"correct_at": {"0.01": True, "0.0001": False}, "implied_at": []}
        | {"max_difference_at": {"0.0001": 0.0031}},
        {"id": "L1_3", "compiled": True, "correctness": False, "kind": "runtime", **both}
        | {"error": "expected target dtype to be Long or Byte, but got Float"}
        | {"correct_at": {"0.01": False, "0.0001": False}, "implied_at": ["0.0001"]}
        | {"reference_error": "Model.forward raised RuntimeError: expected target dtype"},
        {"id": "L1_4", "compiled": True, "correctness": True, "tolerance": 0.01},  # older row
        {"id": "L1_5", "compiled": True, "correctness": False, "kind": "mismatch", **both}
        | {"correct_at": {"0.01": False, "0.0001": False}, "implied_at": ["0.0001"]},
    ]
    (set_dir / RESULTS).write_text("".join(json.dumps(r) + "\n" for r in theirs))

    text = markdown([set_dir])
    # primary (1e-2): 4 compared agree or name a class; at 1e-4 the older row has no verdict
    assert "| h20 | 5 | 5 | 4 | 3 | 1 | 1 | 0 | 4 | 3 | 0 | 0 |" in text
    assert "| h20 at 0.0001 | 5 | 4 | 2 | 1 | 1 | 2 | 0 | 3 | 1 | 0 | 0 |" in text
    assert "KernelBench's primary tolerance (the rows without `at`): h20 0.01" in text
    assert "| reason class | h20 | total | h20 at 0.0001 |" in text
    assert "| KernelBench's reference fails on its own inputs | 1 | 1 | 1 |" in text
    assert "| tolerance (KernelBench today: 1e-4) | 0 | 0 | 1 |" in text
    assert (
        "| h20 | L1_3 | rejected (runtime) | correct | - | constant_pass | KernelBench's "
        "reference fails on its own inputs | Model.forward raised RuntimeError" in text
    )
    assert (
        "| h20 | L1_2_Scale | rejected at 0.0001 | correct | - | constant_pass | tolerance "
        "(KernelBench today: 1e-4) | KernelBench accepts at 0.01, rejects at 0.0001 (max "
        "difference 0.0031) |" in text
    )
    assert text.count("L1_3") == 1  # its disagreement at 1e-4 is the one at 1e-2: listed once


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
        append_record(
            set_dir / "ours", AttemptRecord(pid, 1, 0, "solutions", verdict(pid, **result))
        )
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
