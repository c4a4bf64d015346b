"""``kernelbench``: KernelBench's own verdict on every solution of a prepared set, resumable.

Each solution is evaluated by ``kb_worker.py`` in its own process (its own session, so a hang
is killed with all its children) with its own build folder; ``jobs`` run at once, since stock
``load_inline`` builds take about a minute each on one core pair. Every finished evaluation is
appended at once to ``SET/kernelbench.jsonl`` (one row: ``id``, ``level``, ``compiled``,
``correctness``, ``kind``, ``error``, ``max_difference``, ``stock_build`` (``ok``, ``failed``
or ``none``: did stock ``load_inline``/``load`` build what the solution asked for),
``stock_build_error``, ``seconds``, ``tolerance``, ``trials``, ``attempt``, ``backend``: the
``backend`` given to ``eval_kernel_against_ref``, ``cuda`` or ``triton``, the latter for a
KernelBench tree that has it, such as hzeng2000's fork; with several tolerances
(``tolerances``, the first the primary: ``tolerance``, whose verdict ``correctness`` and the
fields above are), ``correct_at`` (``{"0.01": true, "0.0001": false}``, keyed by
``kb_results.tolerance_key``), ``implied_at`` (the stricter ones not run because a looser one
already failed), ``max_difference_at`` (where KernelBench measured a mismatch), and
``stricter_timeout`` / ``stricter_crash`` when the job's time ran out or its process died
during a stricter evaluation (that verdict is then missing from ``correct_at``);
``reference_error`` when KernelBench's own reference model raised on its inputs
(``kb_worker.watch_reference``)); a rerun skips the ids already there. With a ``deadline``
(epoch seconds) no evaluation starts when fewer than ``min_left_s`` remain, and one still
running at the deadline is killed and *not* recorded, so the next call does it again. A row
whose error is a CUDA out-of-memory (several evaluations share the GPU) is evaluated once more,
alone, at the end, or at the end of the next call when a deadline cut this one before it; the
last row of an id is its verdict. One line per finished evaluation goes
to stdout. KernelBench's evaluator is imported once before anything starts (``preflight``): a
checkout or wheel that is missing stops the run with one line instead of becoming a verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.compat.corpus import PROBLEMS, SOLUTIONS, read_manifest
from benchmarks.kb_peer.kb_import import kb_layout

from cuda_agent.bench.kb_results import kb_sample_verdict, tolerance_key
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.jsonl import append_line, read_lines

RESULTS = "kernelbench.jsonl"
REPO = Path(__file__).resolve().parents[2]
LOG_TAIL_LINES = 12
OOM = "out of memory"


@dataclass
class KbConfig:
    kb: Path
    jobs: int = max(1, (os.cpu_count() or 2) // 3)
    timeout_s: float = 600.0
    deadline: float | None = None
    min_left_s: float = 90.0
    trials: int = 5
    # atol = rtol for fp32, the first the primary; None: KernelBench's own (1e-4 for fp32)
    tolerances: tuple[float | None, ...] = (1e-2, 1e-4)
    gpu_arch: str = "Hopper"
    device: str = "cuda:0"
    work_dir: Path = Path("/tmp/compat-kb")
    backend: str = "cuda"
    python: str = sys.executable

    @property
    def tolerance(self) -> float | None:
        """The primary tolerance: its verdict is the row's ``correctness``."""
        return self.tolerances[0]

    @property
    def tolerance_keys(self) -> list[str]:
        return list(dict.fromkeys(tolerance_key(t) for t in self.tolerances))


def latest_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The last row of each id in a kernelbench.jsonl (a rerun's row replaces the first)."""
    return {str(row["id"]): row for row in read_lines(path) if "id" in row}


def _owes_retry(row: dict[str, Any]) -> bool:
    """A first attempt that ran out of GPU memory (beside the other jobs): retried alone."""
    return int(row.get("attempt", 1)) < 2 and OOM in str(row.get("error") or "")


def run_kernelbench(set_dir: Path, config: KbConfig, only: set[str] | None = None) -> dict:
    """Evaluate the set's solutions not yet in ``SET/kernelbench.jsonl``; a summary."""
    manifest = read_manifest(set_dir)
    out = set_dir / RESULTS
    done = latest_rows(out)
    wanted = {
        pid: info for pid, info in manifest["solutions"].items() if only is None or pid in only
    }
    todo = [(pid, int(info["level"])) for pid, info in wanted.items() if pid not in done]
    # out of memory in an earlier call that ended before its retry: retried alone, after the
    # solutions not yet evaluated (retried first, one at a time, they took whole calls)
    owed = [
        (pid, int(wanted[pid]["level"])) for pid in wanted if pid in done and _owes_retry(done[pid])
    ]
    if todo or owed:
        preflight(config)
    lock = threading.Lock()
    finished: list[dict[str, Any]] = []

    def one(pid: str, level: int, attempt: int) -> None:
        row = _evaluate(set_dir, pid, level, attempt, config)
        if row is None:
            return
        with lock:
            append_line(out, row)
            finished.append(row)
            _progress(row, len(finished), len(todo))

    with ThreadPoolExecutor(max_workers=max(1, config.jobs)) as pool:
        for pid, level in todo:
            pool.submit(one, pid, level, 1)
    retry = owed + [(r["id"], int(r["level"])) for r in finished if _owes_retry(r)]
    for pid, level in retry:  # alone on the GPU this time
        one(pid, level, 2)
    rows = latest_rows(out)
    return {
        "set": set_dir.name,
        "solutions": len(manifest["solutions"]),
        "evaluated": len(rows),
        "correct": sum(1 for r in rows.values() if r.get("correctness")),
        "this_call": len(finished),
        "left": len(manifest["solutions"]) - len(rows),
    }


def preflight(config: KbConfig) -> None:
    """Import KernelBench's evaluator once, as the workers will; one clear error if it fails
    (so a missing checkout or wheel never becomes a verdict on every solution)."""
    if kb_layout(config.kb) is None:
        raise CudaAgentError(
            f"{config.kb}: not a KernelBench checkout (no src/kernelbench/eval.py or src/eval.py)"
        )
    code = "import sys; from pathlib import Path"
    code += "; from benchmarks.kb_peer.kb_import import import_kb; import_kb(Path(sys.argv[1]))"
    done = subprocess.run(
        [config.python, "-c", code, str(config.kb.resolve())],
        capture_output=True,
        text=True,
        env=_env(None),
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise CudaAgentError(f"KernelBench's evaluator does not import: {tail}")


def _env(build: Path | None, backend: str = "cuda") -> dict[str, str]:
    paths = [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    if build is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(build)
        if backend == "triton":
            # KernelBench's triton path ignores build_dir: it imports the solution from a
            # NamedTemporaryFile and Triton caches under ~/.triton; both go to the job's
            # build folder, removed with it.
            env["TMPDIR"] = str(build)
            env["TRITON_CACHE_DIR"] = str(build / "triton-cache")
    return env


def _evaluate(
    set_dir: Path, pid: str, level: int, attempt: int, config: KbConfig
) -> dict[str, Any] | None:
    left = _left(config)
    if left is not None and left < config.min_left_s:
        return None
    stem = pid.split("_", 1)[1]
    work = config.work_dir / set_dir.name / pid
    shutil.rmtree(work, ignore_errors=True)
    (work / "build").mkdir(parents=True)
    payload = {
        "kb": str(config.kb.resolve()),
        "ref_src": (set_dir / PROBLEMS / f"level{level}" / f"{stem}.py").read_text(),
        "cand_src": (set_dir / SOLUTIONS / f"{pid}.py").read_text(),
        "trials": config.trials,
        "tolerance": config.tolerance,
        "tolerances": list(config.tolerances),
        "gpu_arch": config.gpu_arch,
        "device": config.device,
        "build_dir": str(work / "build"),
        "backend": config.backend,
    }
    (work / "payload.json").write_text(json.dumps(payload))
    started = time.monotonic()
    status = _run_worker(work, config, left)
    row: dict[str, Any] = {"id": pid, "level": level, "attempt": attempt}
    row.update({"tolerance": config.tolerance, "trials": config.trials})
    if len(config.tolerances) > 1:
        row["tolerances"] = list(config.tolerances)
    row["backend"] = config.backend
    if status == "deadline":
        shutil.rmtree(work, ignore_errors=True)
        return None
    out = _read_result(work / "result.json")
    keys = config.tolerance_keys
    partial = out is not None and bool(out.get("partial"))  # it stopped in a later evaluation
    has_primary = out is not None and keys[0] in (out.get("kb_results") or {})
    if out is not None and not partial:  # finished (also when its exit was slow)
        row.update(_verdict(out, keys))
    elif out is not None and has_primary:  # the primary's verdict came before it stopped
        row.update(_verdict(out, keys))
        row["stricter_" + ("timeout" if status == "timeout" else "crash")] = True
    elif status == "timeout":
        row.update(_failed("timeout", f"no verdict in {config.timeout_s:.0f} s", keys))
    else:
        row.update(_failed("crash", f"the process died: {_tail(work / 'log.txt')}", keys))
    row["seconds"] = round(time.monotonic() - started, 1)
    shutil.rmtree(work / "build", ignore_errors=True)
    return row


def _run_worker(work: Path, config: KbConfig, left: float | None) -> str:
    """'ok', 'timeout' (the job's own limit) or 'deadline' (the call's)."""
    limit = config.timeout_s if left is None else min(config.timeout_s, left)
    env = _env(work / "build", config.backend)
    with open(work / "log.txt", "w") as log:
        proc = subprocess.Popen(
            [config.python, "-m", "benchmarks.compat.kb_worker", "payload.json", "result.json"],
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=limit)
            return "ok"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "timeout" if limit >= config.timeout_s else "deadline"


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def _verdict(out: dict[str, Any], keys: list[str] | None = None) -> dict[str, Any]:
    """A row's verdict fields from the worker's result; ``keys``: the tolerances asked for
    (``tolerance_key``, the primary first)."""
    builds = out.get("stock_builds") or []
    stock: dict[str, Any] = {
        "stock_build": "none"
        if not builds
        else ("ok" if all(b["ok"] for b in builds) else "failed"),
        "stock_build_error": next((b["error"] for b in builds if not b["ok"]), None),
    }
    if out.get("reference_errors"):
        stock["reference_error"] = str(out["reference_errors"][0])
    keys = keys or [tolerance_key(None)]
    if "exception" in out:
        return {**_failed("runtime", str(out["exception"]), keys), **stock}
    results = out.get("kb_results") or {keys[0]: out.get("kb_result") or {}}
    row = {**stock, **_one(results.get(keys[0]) or {})}
    if len(keys) > 1:
        verdicts = {k: _one(results[k]) for k in keys if isinstance(results.get(k), dict)}
        row["correct_at"] = {k: bool(v["correctness"]) for k, v in verdicts.items()}
        row["implied_at"] = [k for k in out.get("implied") or [] if k in verdicts]
        differences = {k: v["max_difference"] for k, v in verdicts.items() if v["max_difference"]}
        if differences:
            row["max_difference_at"] = differences
    return row


def _one(result: dict[str, Any]) -> dict[str, Any]:
    """The verdict fields of one KernelBench result (one tolerance)."""
    if "exception" in result:  # KernelBench raised outside its handlers (a stricter call)
        return _failed("runtime", str(result["exception"]))
    if result.get("kb_returned_none"):
        return _failed("no_result", "KernelBench returned no result twice (build lock)")
    verdict = kb_sample_verdict(result)
    return {
        "compiled": verdict.compiled,
        "correctness": verdict.correct,
        "kind": verdict.kind,
        "error": verdict.message or None,
        "max_difference": verdict.max_difference,
        "trials_passed": (result.get("metadata") or {}).get("correctness_trials"),
    }


def _failed(kind: str, message: str, keys: list[str] | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {"compiled": False, "correctness": False, "kind": kind}
    row["error"] = message
    if keys and len(keys) > 1:
        row["correct_at"] = dict.fromkeys(keys, False)
    return row


def _left(config: KbConfig) -> float | None:
    return None if config.deadline is None else config.deadline - time.time()


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(lines[-LOG_TAIL_LINES:])[-1500:]


def _progress(row: dict[str, Any], done: int, total: int) -> None:
    verdict = "correct" if row.get("correctness") else f"rejected ({row.get('kind')})"
    print(f"[{done}/{total}] {row['id']}: {verdict} {row.get('seconds', 0):.1f} s", flush=True)
