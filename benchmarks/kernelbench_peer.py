"""KernelBench as the peer: its own evaluator's figures, for side-by-side comparison.

KernelBench (ScalingIntelligence/KernelBench) is imported from a read-only checkout by putting
``<kb>/src`` on ``sys.path``; none of its code is copied here. Its evaluator's output (prints,
nvcc/ninja logs) goes to a log file, not to the table.

Modes:
  self-speedup  each reference problem is its own candidate (``class Model`` renamed
                ``ModelNew``); KernelBench's correctness + cuda-event timing
                (``eval_kernel_against_ref``, the arguments ``scripts/run_and_check.py`` uses) and
                its eager reference timing (``timing.measure_ref_program_time``).
  build         KernelBench's load_inline path for its few-shot add example: cold build in a
                fresh TORCH_EXTENSIONS_DIR, cached load in a new process, whole evaluation cold.
  stream        KernelBench's non-default-stream adversarial kernel against level1/1 (as in its
                ``unit_tests/test_eval_adversarial.py``), next to an honest cuBLAS timing.
  transform     (no GPU) print the ModelNew transform of some problems.
  preflight     (no GPU needed) import KernelBench's evaluator and report versions / stubs.

On the GPU machine (KernelBench at .kb, wheels in .whl):
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 benchmarks/kernelbench_peer.py self-speedup --kb .kb \\
      --problems L1/19_ReLU.py,L2/12_Gemm_Multiply_LeakyReLU.py --out $OUT/kb_self.json

KernelBench's utils module imports ``openai`` and ``litellm`` at module level (used only to
query LLMs); when they are not installed, inert stand-in modules are registered for them so
that ``kernelbench.eval`` imports. The stubs are listed in the JSON (``kb.stubs``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import hashlib
import importlib.util
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
DEFAULT_KB = HERE.parent.parent / ".kb"
STREAM_PROBLEM = "level1/1_Square_matrix_multiplication_.py"
STREAM_KERNEL = "src/kernelbench/unit_tests/test_kernels/non_default_stream_kernel.py"
ADD_CANDIDATE = "src/kernelbench/prompts/model_new_ex_add.py"
ADD_REFERENCE = "src/kernelbench/prompts/model_ex_add.py"

# scripts/run_and_check.py and scripts/eval_from_generations.py defaults
RUN_AND_CHECK = {
    "num_correct_trials": 5,
    "num_perf_trials": 100,
    "timing_method": "cuda_event",
    "precision": "fp32",
    "backend": "cuda",
}
# unit_tests/test_eval_adversarial.py::test_non_default_stream
STREAM_TEST = {"num_correct_trials": 5, "num_perf_trials": 10, "excessive_speedup_threshold": 10}


# ----------------------------------------------------------------------------------------------
# importing KernelBench


def _stub_module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__dict__["__kbpeer_stub__"] = True
    sys.modules[name] = mod
    return mod


def _unavailable(what: str):
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"{what} is a stand-in registered by kernelbench_peer.py")

    return fail


def kb_layout(kb: Path) -> str | None:
    """'package' (``src/kernelbench/eval.py``, KernelBench today), 'flat' (``src/eval.py``,
    older trees and hzeng2000's fork with the triton backend) or None (no checkout)."""
    src = kb.resolve() / "src"
    if (src / "kernelbench" / "eval.py").is_file():
        return "package"
    if (src / "eval.py").is_file() and (src / "__init__.py").is_file():
        return "flat"
    return None


def import_kb(kb: Path) -> dict[str, Any]:
    """Import KernelBench's evaluator from the checkout; returns its modules and the stubs used."""
    src = kb.resolve() / "src"
    layout = kb_layout(kb)
    if layout is None:
        raise SystemExit(f"no KernelBench checkout at {kb} (expected {src}/kernelbench/eval.py)")
    root = str(src) if layout == "package" else str(kb.resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    stubs = []
    # Only used by kernelbench.utils.query_server (LLM calls), imported at module level.
    if importlib.util.find_spec("openai") is None:
        _stub_module("openai", {"OpenAI": _unavailable("openai.OpenAI")})
        stubs.append("openai")
    if importlib.util.find_spec("litellm") is None:
        _stub_module("litellm", {"completion": _unavailable("litellm.completion")})
        stubs.append("litellm")
    if importlib.util.find_spec("dotenv") is None:  # the wheel is shipped; this is a fallback
        _stub_module("dotenv", {"load_dotenv": lambda *a, **k: False})
        stubs.append("dotenv")
    if layout == "flat":
        # Older trees (and forks such as hzeng2000's, with the triton backend): the package
        # is ``src`` itself; utils.py also imports transformers at module level.
        if importlib.util.find_spec("transformers") is None:
            _stub_module("transformers", {"AutoTokenizer": _unavailable("AutoTokenizer")})
            stubs.append("transformers")
        kb_eval = importlib.import_module("src.eval")
        kb_timing = importlib.import_module("src.timing")
        kb_utils = importlib.import_module("src.utils")
        kb_static = None  # no kernel_static_checker in those trees
    else:
        kb_eval = importlib.import_module("kernelbench.eval")
        kb_static = importlib.import_module("kernelbench.kernel_static_checker")
        kb_timing = importlib.import_module("kernelbench.timing")
        kb_utils = importlib.import_module("kernelbench.utils")
    return {
        "eval": kb_eval,
        "timing": kb_timing,
        "utils": kb_utils,
        "static": kb_static,
        "stubs": stubs,
    }


def kb_provenance(kb: Path, stubs: list[str] | None = None) -> dict[str, Any]:
    digest = hashlib.sha256()
    for rel in ("src/kernelbench/eval.py", "src/kernelbench/timing.py") + (
        ("src/eval.py", "src/timing.py") if kb_layout(kb) == "flat" else ()
    ):
        path = kb / rel
        if path.is_file():
            digest.update(path.read_bytes())
    info: dict[str, Any] = {"path": str(kb.resolve()), "eval_timing_sha256": digest.hexdigest()}
    if stubs is not None:
        info["stubs"] = stubs
    return info


def env_info() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception as exc:  # pragma: no cover - informational only
        info["torch_error"] = repr(exc)
    for name in ("pydantic", "pydantic_core", "typing_extensions", "triton", "numpy"):
        try:
            from importlib.metadata import version

            info[name] = version(name.replace("_", "-"))
        except Exception:
            info[name] = None
    return info


# ----------------------------------------------------------------------------------------------
# helpers


@contextlib.contextmanager
def output_to(log_path: Path):
    """Send everything written to fds 1 and 2 (Python prints, nvcc, ninja) to log_path."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


def jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def write_json(path: Path | None, payload: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(payload), indent=2) + "\n")
    tmp.replace(path)


def error_string(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def exec_result(result: Any) -> dict[str, Any]:
    """KernelExecResult (pydantic) -> plain dict; KB returns None on a build lock error."""
    if result is None:
        return {"kb_returned_none": True}
    if hasattr(result, "model_dump"):
        return jsonable(result.model_dump())
    return jsonable(dict(vars(result)))


def positive(value: Any) -> float | None:
    """KB uses -1.0 for 'not measured'."""
    try:
        return float(value) if value is not None and float(value) > 0 else None
    except (TypeError, ValueError):
        return None


def ratio(num: Any, den: Any) -> float | None:
    try:
        if num is None or den is None or float(num) <= 0 or float(den) <= 0:
            return None
        return float(num) / float(den)
    except (TypeError, ValueError):
        return None


def static_check(mods: dict[str, Any], src: str) -> dict[str, Any]:
    """KB's regex static checker, as run_and_check.py runs it (informational here)."""
    try:
        valid, errors, warnings = mods["static"].validate_kernel_static(
            src, backend=RUN_AND_CHECK["backend"], precision=RUN_AND_CHECK["precision"]
        )
        return {"valid": valid, "errors": errors, "warnings": warnings}
    except Exception as exc:
        return {"error": error_string(exc)}


def fmt(value: Any, spec: str = ".4g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return str(value)


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    print(line)
    print("-" * len(line))
    for row in cells:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


# ----------------------------------------------------------------------------------------------
# reference -> candidate transform

_CLASS_RE = re.compile(r"^(\s*class\s+)Model(\s*[(:])", re.MULTILINE)
_SUPER_RE = re.compile(r"\bsuper\(\s*Model\s*,")


def to_model_new(src: str) -> str:
    """The reference source with ``class Model`` renamed ``ModelNew``; the rest unchanged."""
    out, count = _CLASS_RE.subn(r"\1ModelNew\2", src)
    if count != 1:
        raise ValueError(f"expected exactly one 'class Model' definition, found {count}")
    out = _SUPER_RE.sub("super(ModelNew,", out)
    classes = {n.name for n in ast.walk(ast.parse(out)) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes or "Model" in classes:
        raise ValueError(f"transform left classes {sorted(classes)}")
    return out


def resolve_problem(kb: Path, spec: str) -> Path:
    rel = re.sub(r"^[Ll](\d+)/", r"level\1/", spec.strip())
    for candidate in (kb / "KernelBench" / rel, Path(spec)):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"problem {spec!r} not found under {kb / 'KernelBench'}")


def problem_list(args: argparse.Namespace) -> list[str]:
    items: list[str] = []
    for chunk in args.problems or []:
        items += [p.strip() for p in chunk.split(",") if p.strip()]
    if args.problem_file:
        for line in Path(args.problem_file).read_text().splitlines():
            line = line.split("#", 1)[0]
            items += [p.strip() for p in line.split(",") if p.strip()]
    return items


# ----------------------------------------------------------------------------------------------
# worker processes (isolation: a crash, CUDA error or hang costs only that task)


def run_worker(
    task: str, payload: dict[str, Any], log_path: Path, timeout: float, env: dict | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kbpeer-w-") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [sys.executable, str(HERE), "_worker", task, json.dumps(payload), str(result_path)]
        start = time.perf_counter()
        with open(log_path, "a") as log:
            log.write(f"\n===== worker {task} {json.dumps(payload)}\n")
            log.flush()
            try:
                proc = subprocess.run(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    env={**os.environ, **(env or {})},
                    check=False,
                )
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
        wall = time.perf_counter() - start
        out = json.loads(result_path.read_text()) if result_path.is_file() else {}
        out["process_wall_s"] = wall
        if rc is None:
            out.setdefault("error", f"worker timed out after {timeout:.0f} s")
        elif rc != 0:
            out.setdefault("error", f"worker exited with status {rc} (see log)")
        return out


def worker_main(task: str, payload_json: str, result_path: str) -> None:
    t0 = time.perf_counter()
    payload = json.loads(payload_json)
    out: dict[str, Any] = {}
    try:
        mods = import_kb(Path(payload["kb"]))
        out["import_s"] = time.perf_counter() - t0  # on a GPU this includes CUDA init
        out["stubs"] = mods["stubs"]
        out.update(WORKER_TASKS[task](mods, payload))
    except BaseException as exc:
        out["error"] = error_string(exc)
        out["traceback"] = traceback.format_exc()[-4000:]
    Path(result_path).write_text(json.dumps(jsonable(out)))


def set_arch(mods: dict[str, Any], arch: str) -> None:
    """run_and_check.py (local) calls set_gpu_arch(gpu_arch) before evaluating."""
    if arch and arch.lower() != "none":
        mods["utils"].set_gpu_arch([a.strip() for a in arch.split(",")])


# ----------------------------------------------------------------------------------------------
# self-speedup


def cuda_warmup() -> None:
    import torch

    torch.cuda.init()
    x = torch.randn(512, 512, device="cuda")
    (x @ x).sum().item()
    torch.cuda.synchronize()


def self_one(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """One problem: KB eval of reference-as-candidate, then KB's eager reference timing."""
    import torch

    kb = Path(payload["kb"])
    rec: dict[str, Any] = {"problem": payload["problem"], "repeat": payload.get("repeat", 0)}
    try:
        ref_src = resolve_problem(kb, payload["problem"]).read_text()
        cand_src = to_model_new(ref_src)
    except Exception as exc:
        rec["error"] = error_string(exc)
        return rec
    rec["static_check"] = static_check(mods, cand_src)  # informational (see report notes)
    device = torch.device(payload["device"])
    n_correct, n_perf = payload["num_correct_trials"], payload["num_perf_trials"]
    method = payload["timing_method"]
    precision = mods["eval"].get_torch_dtype_from_string(RUN_AND_CHECK["precision"])

    start = time.perf_counter()
    try:
        result = mods["eval"].eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=cand_src,
            measure_performance=True,
            timing_method=method,
            verbose=False,
            num_correct_trials=n_correct,
            num_perf_trials=n_perf,
            build_dir=payload["build_dir"],
            device=device,
            backend=RUN_AND_CHECK["backend"],
            precision=precision,
            check_for_excessive_speedup=payload["excessive_speedup_check"],
        )
        rec["candidate_wall_s"] = time.perf_counter() - start
        res = exec_result(result)
        rec["kb_result"] = res
        rec["correct"] = bool(res.get("correctness"))
        rec["cand_ms"] = positive(res.get("runtime"))
        rec["ref_in_eval_ms"] = positive(res.get("ref_runtime"))
        meta = res.get("metadata") or {}
        for key in ("compilation_error", "runtime_error", "correctness_issue", "excessive_speedup"):
            if key in meta:
                rec["kb_issue"] = f"{key}: {meta[key]}"[:300]
                break
    except Exception as exc:
        rec["candidate_wall_s"] = time.perf_counter() - start
        rec["error"] = error_string(exc)
        rec["correct"] = False

    start = time.perf_counter()
    try:
        stats = mods["timing"].measure_ref_program_time(
            ref_arch_name=payload["problem"],
            ref_arch_src=ref_src,
            num_trials=n_perf,
            use_torch_compile=False,
            timing_method=method,
            device=device,
            verbose=False,
            precision=RUN_AND_CHECK["precision"],
        )
        rec["ref_wall_s"] = time.perf_counter() - start
        rec["ref_stats"] = jsonable(stats)
        rec["ref_ms"] = stats.get("mean") if stats else None
        if stats is None:
            rec["ref_error"] = "measure_ref_program_time returned None (see log)"
    except Exception as exc:
        rec["ref_wall_s"] = time.perf_counter() - start
        rec["ref_error"] = error_string(exc)
        rec["ref_ms"] = None
    if payload.get("compile_ref"):
        start = time.perf_counter()
        try:
            stats = mods["timing"].measure_ref_program_time(
                ref_arch_name=payload["problem"],
                ref_arch_src=ref_src,
                num_trials=n_perf,
                use_torch_compile=True,
                timing_method=method,
                device=device,
                verbose=False,
                precision=RUN_AND_CHECK["precision"],
            )
            rec["ref_compile_stats"] = jsonable(stats)
            rec["ref_compile_ms"] = stats.get("mean") if stats else None
        except Exception as exc:
            rec["ref_compile_error"] = error_string(exc)
        rec["ref_compile_wall_s"] = time.perf_counter() - start
        rec["speedup_vs_compile"] = (
            ratio(rec.get("ref_compile_ms"), rec.get("cand_ms")) if rec.get("correct") else None
        )
    rec["speedup"] = ratio(rec.get("ref_ms"), rec.get("cand_ms")) if rec.get("correct") else None
    rec["speedup_in_eval"] = (
        ratio(rec.get("ref_in_eval_ms"), rec.get("cand_ms")) if rec.get("correct") else None
    )
    return rec


def cmd_self_speedup(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    problems = problem_list(args)
    if not problems:
        raise SystemExit("no problems given (--problems / --problem-file)")
    log = log_path(args)
    build_root = Path(tempfile.mkdtemp(prefix="kbpeer-self-"))
    config = {
        "num_correct_trials": args.correct_trials,
        "num_perf_trials": args.perf_trials,
        "timing_method": args.timing_method,
        "excessive_speedup_check": not args.no_excessive_speedup_check,
        "device": args.device,
        "isolate": args.isolate,
        "compile_ref": args.compile_ref,
        "repeat": args.repeat,
        "precision": RUN_AND_CHECK["precision"],
    }
    payload_base = {"kb": str(kb.resolve()), **config}
    mods = None
    stubs = None
    if not args.isolate:
        with output_to(log):
            mods = import_kb(kb)
            cuda_warmup()
        stubs = mods["stubs"]
    report: dict[str, Any] = {
        "mode": "self-speedup",
        "kb": kb_provenance(kb, stubs),
        "env": env_info(),
        "config": config,
        "log": str(log),
        "results": [],
    }
    poisoned = False
    for rep in range(args.repeat):
        for i, problem in enumerate(problems):
            payload = {
                **payload_base,
                "problem": problem,
                "repeat": rep,
                "build_dir": str(build_root / f"r{rep}_p{i}"),
            }
            if mods is not None and not poisoned:
                with output_to(log):
                    try:
                        rec = self_one(mods, payload)
                    except Exception as exc:
                        rec = {"problem": problem, "repeat": rep, "error": error_string(exc)}
                    poisoned = not _cuda_usable()
                if poisoned:
                    rec["note"] = "CUDA context unusable afterwards; later problems run isolated"
            else:
                rec = run_worker("self_one", payload, log, args.timeout)
                rec.setdefault("problem", problem)
                rec.setdefault("repeat", rep)
            report["results"].append(rec)
            write_json(args.out, report)
            print(
                f"[{rep}] {problem}: correct={fmt(rec.get('correct'))} "
                f"speedup={fmt(rec.get('speedup'), '.3f')}"
                + (f" error={rec['error'][:120]}" if rec.get("error") else ""),
                file=sys.stderr,
                flush=True,
            )
    shutil.rmtree(build_root, ignore_errors=True)

    headers = [
        "problem",
        "rep",
        "correct",
        "cand ms",
        "ref ms",
        "speedup",
        "ref-in-eval ms",
        "cand wall s",
        "ref wall s",
        "error",
    ]
    rows = [
        [
            r["problem"],
            r.get("repeat"),
            r.get("correct"),
            r.get("cand_ms"),
            r.get("ref_ms"),
            r.get("speedup"),
            r.get("ref_in_eval_ms"),
            r.get("candidate_wall_s"),
            r.get("ref_wall_s"),
            (r.get("error") or r.get("kb_issue") or r.get("ref_error") or "")[:40],
        ]
        for r in report["results"]
    ]
    print_table(headers, rows)
    if args.repeat > 1:
        summary = summarize(report["results"])
        report["summary"] = summary
        print()
        print_table(
            [
                "problem",
                "n",
                "speedup median",
                "speedup min",
                "speedup max",
                "cand ms CV %",
                "cand wall s median",
            ],
            [
                [
                    s["problem"],
                    s["n"],
                    s["speedup_median"],
                    s["speedup_min"],
                    s["speedup_max"],
                    s["cand_ms_cv_pct"],
                    s["cand_wall_s_median"],
                ]
                for s in summary
            ],
        )
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0


def _cuda_usable() -> bool:
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        gc.collect()
        return True
    except Exception:
        return False


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for problem in dict.fromkeys(r["problem"] for r in results):
        rs = [r for r in results if r["problem"] == problem]
        sp = [r["speedup"] for r in rs if r.get("speedup")]
        cand = [r["cand_ms"] for r in rs if r.get("cand_ms")]
        wall = [r["candidate_wall_s"] for r in rs if r.get("candidate_wall_s") is not None]
        cv = None
        if len(cand) > 1 and statistics.mean(cand) > 0:
            cv = 100 * statistics.stdev(cand) / statistics.mean(cand)
        out.append(
            {
                "problem": problem,
                "n": len(rs),
                "speedup_median": statistics.median(sp) if sp else None,
                "speedup_min": min(sp) if sp else None,
                "speedup_max": max(sp) if sp else None,
                "cand_ms_cv_pct": cv,
                "cand_wall_s_median": statistics.median(wall) if wall else None,
            }
        )
    return out


# ----------------------------------------------------------------------------------------------
# build


def build_load(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """KB's load_custom_model on the add example with build_dir (sets TORCH_EXTENSIONS_DIR)."""
    set_arch(mods, payload["gpu_arch"])
    src = (Path(payload["kb"]) / ADD_CANDIDATE).read_text()
    start = time.perf_counter()
    model_new = mods["eval"].load_custom_model(src, {}, payload["build_dir"])
    out: dict[str, Any] = {"load_s": time.perf_counter() - start, "ok": model_new is not None}
    out["torch_cuda_arch_list"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
    out["so_files"] = sorted(str(f) for f in Path(payload["build_dir"]).rglob("*.so"))
    return out


def build_eval(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A whole KB evaluation of the add example against its reference (run_and_check args)."""
    import torch

    set_arch(mods, payload["gpu_arch"])
    kb = Path(payload["kb"])
    cand = (kb / ADD_CANDIDATE).read_text()
    ref = (kb / ADD_REFERENCE).read_text()
    device = torch.device(payload["device"])
    start = time.perf_counter()
    static = static_check(mods, cand)
    static_s = time.perf_counter() - start
    start = time.perf_counter()
    result = mods["eval"].eval_kernel_against_ref(
        original_model_src=ref,
        custom_model_src=cand,
        measure_performance=True,
        timing_method=RUN_AND_CHECK["timing_method"],
        verbose=False,
        num_correct_trials=RUN_AND_CHECK["num_correct_trials"],
        num_perf_trials=RUN_AND_CHECK["num_perf_trials"],
        build_dir=payload["build_dir"],
        device=device,
        backend=RUN_AND_CHECK["backend"],
        precision=torch.float32,
    )
    eval_s = time.perf_counter() - start
    res = exec_result(result)
    return {
        "eval_s": eval_s,
        "static_check_s": static_s,
        "static_check": static,
        "correct": bool(res.get("correctness")),
        "compiled": bool(res.get("compiled")),
        "cand_ms": res.get("runtime"),
        "ref_in_eval_ms": res.get("ref_runtime"),
        "kb_result": res,
    }


def cmd_build(args: argparse.Namespace) -> int:
    kb = Path(args.kb).resolve()
    log = log_path(args)
    base = {"kb": str(kb), "gpu_arch": args.gpu_arch, "device": args.device}
    ext_dir = Path(tempfile.mkdtemp(prefix="kbpeer-ext-"))
    eval_dir = Path(tempfile.mkdtemp(prefix="kbpeer-ext-eval-"))
    steps = [
        ("(i) cold build + load (fresh TORCH_EXTENSIONS_DIR)", "build_load", ext_dir, "load_s"),
        ("(ii) cached load, new process", "build_load", ext_dir, "load_s"),
        ("(iii) whole KB evaluation, cold build", "build_eval", eval_dir, "eval_s"),
        ("(iv) whole KB evaluation, cached build", "build_eval", eval_dir, "eval_s"),
    ]
    report: dict[str, Any] = {
        "mode": "build",
        "kb": kb_provenance(kb),
        "env": env_info(),
        "config": {
            **base,
            "eval_args": RUN_AND_CHECK,
            "candidate": ADD_CANDIDATE,
            "reference": ADD_REFERENCE,
        },
        "log": str(log),
        "results": [],
    }
    for label, task, build_dir, key in steps:
        rec = run_worker(task, {**base, "build_dir": str(build_dir)}, log, args.timeout)
        rec["step"] = label
        rec["seconds"] = rec.get(key)
        report["results"].append(rec)
        write_json(args.out, report)
    for d in (ext_dir, eval_dir):
        shutil.rmtree(d, ignore_errors=True)
    print_table(
        ["step", "seconds", "process wall s", "import s", "correct", "error"],
        [
            [
                r["step"],
                r.get("seconds"),
                r.get("process_wall_s"),
                r.get("import_s"),
                r.get("correct"),
                (r.get("error") or "")[:50],
            ]
            for r in report["results"]
        ],
    )
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0


# ----------------------------------------------------------------------------------------------
# stream


def stream_eval(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """test_eval_adversarial.run_test_kernel, with the timing method given."""
    kb = Path(payload["kb"])
    set_arch(mods, payload["gpu_arch"])
    ref = (kb / "KernelBench" / STREAM_PROBLEM).read_text()
    cand = (kb / STREAM_KERNEL).read_text()
    static = static_check(mods, cand)
    start = time.perf_counter()
    # Same call as the test: default device, no build_dir (TORCH_EXTENSIONS_DIR is set in env).
    result = mods["eval"].eval_kernel_against_ref(
        original_model_src=ref,
        custom_model_src=cand,
        num_correct_trials=STREAM_TEST["num_correct_trials"],
        num_perf_trials=STREAM_TEST["num_perf_trials"],
        measure_performance=True,
        timing_method=payload["timing_method"],
        check_for_excessive_speedup=True,
        excessive_speedup_threshold=STREAM_TEST["excessive_speedup_threshold"],
    )
    wall = time.perf_counter() - start
    res = exec_result(result)
    meta = res.get("metadata") or {}
    return {
        "eval_s": wall,
        "static_check": static,
        "correct": bool(res.get("correctness")),
        "cand_ms": res.get("runtime"),
        "ref_ms": res.get("ref_runtime"),
        "speedup": ratio(res.get("ref_runtime"), res.get("runtime")),
        "excessive_speedup_flag": bool(meta.get("excessive_speedup")),
        "kb_result": res,
    }


def _median_event_ms(fn, warmup: int = 5, trials: int = 20) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _median_synced_wall_ms(fn, warmup: int = 5, trials: int = 20) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()  # device-wide: waits for every stream
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def stream_honest(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Honest figures for the same shape: torch.matmul (cuBLAS) and the adversarial kernel."""
    import torch

    kb = Path(payload["kb"])
    set_arch(mods, payload["gpu_arch"])
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference and the kernel are FP32
    ctx: dict[str, Any] = {}
    _model, _init, get_inputs = mods["eval"].load_original_model_and_inputs(
        (kb / "KernelBench" / STREAM_PROBLEM).read_text(), ctx
    )
    mods["eval"].set_seed(42)
    a, b = (x.cuda() for x in get_inputs())
    stream_ptr = torch.cuda.current_stream().cuda_stream
    matmul_ms = _median_event_ms(lambda: torch.matmul(a, b))
    matmul_wall_ms = _median_synced_wall_ms(lambda: torch.matmul(a, b))
    out: dict[str, Any] = {
        "shape": [list(a.shape), list(b.shape)],
        "dtype": str(a.dtype),
        "allow_tf32": False,
        "stream": "default" if stream_ptr == 0 else hex(stream_ptr),
        "matmul_event_median_ms": matmul_ms,
        "matmul_synced_wall_median_ms": matmul_wall_ms,
        "trials": 20,
        "warmup": 5,
    }
    model_new = mods["eval"].load_custom_model(
        (kb / STREAM_KERNEL).read_text(), {}, payload["build_dir"]
    )
    adv = model_new().cuda()
    with torch.no_grad():
        out["adversarial_event_median_ms"] = _median_event_ms(lambda: adv(a, b))
        out["adversarial_synced_wall_median_ms"] = _median_synced_wall_ms(lambda: adv(a, b))
        got = adv(a, b)
        torch.cuda.synchronize()
        out["adversarial_max_abs_diff"] = float((got - torch.matmul(a, b)).abs().max())
    out["true_speedup_vs_matmul"] = ratio(matmul_wall_ms, out["adversarial_synced_wall_median_ms"])
    return out


def cmd_stream(args: argparse.Namespace) -> int:
    kb = Path(args.kb).resolve()
    log = log_path(args)
    ext_dir = Path(tempfile.mkdtemp(prefix="kbpeer-stream-"))
    base = {"kb": str(kb), "gpu_arch": args.gpu_arch, "build_dir": str(ext_dir)}
    methods = [m.strip() for m in args.stream_timing.split(",") if m.strip()]
    report: dict[str, Any] = {
        "mode": "stream",
        "kb": kb_provenance(kb),
        "env": env_info(),
        "config": {
            **base,
            "problem": STREAM_PROBLEM,
            "kernel": STREAM_KERNEL,
            "eval_args": STREAM_TEST,
            "timing_methods": methods,
        },
        "log": str(log),
        "kb_evals": [],
    }
    env = {"TORCH_EXTENSIONS_DIR": str(ext_dir)}
    for method in methods:
        rec = run_worker("stream_eval", {**base, "timing_method": method}, log, args.timeout, env)
        rec["timing_method"] = method
        report["kb_evals"].append(rec)
        write_json(args.out, report)
    honest = run_worker("stream_honest", base, log, args.timeout, env)
    report["honest"] = honest
    write_json(args.out, report)
    shutil.rmtree(ext_dir, ignore_errors=True)

    rows = [
        [
            f"KB eval, {r['timing_method']}",
            r.get("correct"),
            r.get("cand_ms"),
            r.get("ref_ms"),
            r.get("speedup"),
            r.get("excessive_speedup_flag"),
            (r.get("error") or "")[:40],
        ]
        for r in report["kb_evals"]
    ]
    rows.append(
        [
            "torch.matmul, events (median 20)",
            None,
            honest.get("matmul_event_median_ms"),
            None,
            None,
            None,
            (honest.get("error") or "")[:40],
        ]
    )
    rows.append(
        [
            "torch.matmul, synced wall (median 20)",
            None,
            honest.get("matmul_synced_wall_median_ms"),
            None,
            None,
            None,
            "",
        ]
    )
    rows.append(
        [
            "adversarial, events (median 20)",
            None,
            honest.get("adversarial_event_median_ms"),
            None,
            None,
            None,
            "",
        ]
    )
    rows.append(
        [
            "adversarial, synced wall (median 20)",
            None,
            honest.get("adversarial_synced_wall_median_ms"),
            None,
            honest.get("true_speedup_vs_matmul"),
            None,
            "",
        ]
    )
    print_table(["measurement", "correct", "ms", "ref ms", "speedup", "flagged", "error"], rows)
    static = next(
        (r.get("static_check") for r in report["kb_evals"] if r.get("static_check")), None
    )
    if static is not None:
        print(f"\nKB static checker on the kernel: {static}")
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0


# ----------------------------------------------------------------------------------------------
# CPU-only modes


def cmd_transform(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    for problem in problem_list(args):
        try:
            src = to_model_new(resolve_problem(kb, problem).read_text())
            lines = [ln for ln in src.splitlines() if "ModelNew" in ln]
            print(f"{problem}:")
            for ln in lines:
                print(f"    {ln.strip()}")
        except Exception as exc:
            print(f"{problem}: ERROR {error_string(exc)}")
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    log = log_path(args)
    with output_to(log):
        mods = import_kb(kb)
    info = {
        "kb": kb_provenance(kb, mods["stubs"]),
        "env": env_info(),
        "eval_kernel_against_ref": callable(mods["eval"].eval_kernel_against_ref),
        "measure_ref_program_time": callable(mods["timing"].measure_ref_program_time),
    }
    print(json.dumps(jsonable(info), indent=2))
    write_json(args.out, info)
    return 0


# ----------------------------------------------------------------------------------------------


def log_path(args: argparse.Namespace) -> Path:
    if args.log:
        path = Path(args.log)
    elif args.out:
        path = Path(str(args.out) + ".kb.log")
    else:
        path = Path(tempfile.mkstemp(prefix="kbpeer-", suffix=".log")[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.resolve()


WORKER_TASKS = {
    "self_one": self_one,
    "build_load": build_load,
    "build_eval": build_eval,
    "stream_eval": stream_eval,
    "stream_honest": stream_honest,
}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="mode", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--kb", default=str(DEFAULT_KB), help="KernelBench checkout (default .kb)")
        sp.add_argument("--out", type=Path, help="write JSON results here")
        sp.add_argument("--log", help="KernelBench's output (default: <out>.kb.log or a temp file)")
        sp.add_argument(
            "--timeout", type=float, default=300.0, help="seconds per worker process (default 300)"
        )

    def problems(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--problems",
            action="append",
            help="comma-separated, relative to <kb>/KernelBench; L1/ = level1/",
        )
        sp.add_argument("--problem-file", help="text file: problems, one per line (# comments)")

    s = sub.add_parser("self-speedup", help="reference as candidate: KB correctness + timing")
    common(s)
    problems(s)
    s.add_argument("--repeat", type=int, default=1, help="repeat the whole measurement N times")
    s.add_argument("--correct-trials", type=int, default=RUN_AND_CHECK["num_correct_trials"])
    s.add_argument("--perf-trials", type=int, default=RUN_AND_CHECK["num_perf_trials"])
    s.add_argument(
        "--timing-method",
        default=RUN_AND_CHECK["timing_method"],
        help="KB timing method (cuda_event, do_bench, do_bench_impl, host_time)",
    )
    s.add_argument("--device", default="cuda:0")
    s.add_argument(
        "--no-excessive-speedup-check",
        action="store_true",
        help="skip the reference timing inside eval_kernel_against_ref",
    )
    s.add_argument(
        "--compile-ref",
        action="store_true",
        help="also time the reference under torch.compile (as run_and_check does)",
    )
    s.add_argument(
        "--isolate",
        action="store_true",
        help="evaluate each problem in its own process (timed inside it)",
    )
    s.set_defaults(func=cmd_self_speedup)

    b = sub.add_parser("build", help="KB's load_inline path: cold, cached, whole evaluation")
    common(b)
    b.add_argument(
        "--gpu-arch",
        default="Hopper",
        help="KB set_gpu_arch value (run_and_check maps H200 to Hopper); 'none' unsets",
    )
    b.add_argument("--device", default="cuda:0")
    b.set_defaults(func=cmd_build)

    st = sub.add_parser("stream", help="KB's non-default-stream adversarial kernel")
    common(st)
    st.add_argument("--gpu-arch", default="Hopper")
    st.add_argument(
        "--stream-timing",
        default="do_bench,cuda_event",
        help="KB timing methods to evaluate with (the test uses do_bench)",
    )
    st.set_defaults(func=cmd_stream)

    t = sub.add_parser("transform", help="(CPU) show the Model -> ModelNew transform")
    common(t)
    problems(t)
    t.set_defaults(func=cmd_transform)

    pf = sub.add_parser("preflight", help="(CPU) import KB's evaluator, report versions/stubs")
    common(pf)
    pf.set_defaults(func=cmd_preflight)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_worker"]:
        worker_main(*argv[1:4])
        return 0
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
