"""Run a problem once in a worker process (``cuda-agent problems check|lint``) and report on it.

``check_problem_runtime`` runs one problem in its own worker; ``check_request`` and
``check_report`` let a pool run many (``problems lint``).
"""

from __future__ import annotations

import secrets
import shutil
from typing import Any

from cuda_agent.core.paths import ensure_dir, scratch_dir
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.requests import worker_request
from cuda_agent.evaluator.worker.protocol import EvalSettings, WorkerRequest
from cuda_agent.evaluator.worker_process import run_worker


def check_problem_runtime(
    problem: Problem,
    backend: str = "cpu",
    seed: int = 0,
    timeout_s: float = 300.0,
    cpu_threads: int = 1,
) -> dict[str, Any]:
    """``{"ok": True, "inputs": ..., "outputs": ..., ...}`` or ``{"ok": False, "error": ...}``."""
    request = check_request(problem, backend, seed, cpu_threads)
    scratch = ensure_dir(scratch_dir()) / f"check-{secrets.token_hex(6)}"
    try:
        outcome = run_worker(request, timeout_s=timeout_s, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    record = outcome.record
    if record is None:
        tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
        return {
            "ok": False,
            "error": f"the problem process {outcome.death_reason()} {tail[0]}".strip(),
        }
    return check_report(record)


def check_request(
    problem: Problem, backend: str, seed: int = 0, cpu_threads: int = 1
) -> WorkerRequest:
    """The worker request that runs and lints ``problem`` (mode ``problem_check``)."""
    settings = EvalSettings(backend=backend, cpu_threads=cpu_threads)
    return worker_request("problem_check", settings, problem, seed)


def check_report(record: dict[str, Any]) -> dict[str, Any]:
    """The report in a ``problem_check`` worker's record."""
    if "ok" not in record:  # an internal error record
        error = record.get("error", {})
        return {"ok": False, "error": str(error.get("message", error))}
    return {k: v for k, v in record.items() if k not in ("nonce", "type")}
