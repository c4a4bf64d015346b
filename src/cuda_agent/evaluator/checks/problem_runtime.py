"""Run a problem once in a worker process (``cuda-agent problems check|lint``) and report on it.

``check_problem_runtime`` runs one problem in its own worker; ``check_request`` and
``check_record`` let a pool run many (``problems lint``).
"""

from __future__ import annotations

import secrets
import shutil
from typing import Any

from cuda_agent.core.paths import ensure_dir, scratch_dir
from cuda_agent.core.records import ProblemCheckRecord, WorkerRecord
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.launch.worker_process import run_worker
from cuda_agent.evaluator.worker.protocol import EvalSettings, WorkerRequest


def check_problem_runtime(
    problem: Problem,
    backend: str = "cpu",
    seed: int = 0,
    timeout_s: float = 300.0,
    cpu_threads: int = 1,
) -> ProblemCheckRecord:
    """The problem's record: ``ok`` with its shapes, speed and lint, or the ``error``."""
    request = check_request(problem, backend, seed, cpu_threads)
    scratch = ensure_dir(scratch_dir()) / f"check-{secrets.token_hex(6)}"
    try:
        outcome = run_worker(request, timeout_s=timeout_s, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
    died = f"the problem process {outcome.death_reason()} {tail[0]}".strip()
    return check_record(outcome.record, died)


def check_request(
    problem: Problem, backend: str, seed: int = 0, cpu_threads: int = 1
) -> WorkerRequest:
    """The worker request that runs and lints ``problem`` (mode ``problem_check``)."""
    settings = EvalSettings(backend=backend, cpu_threads=cpu_threads)
    return worker_request("problem_check", settings, problem, seed)


def check_record(record: WorkerRecord | None, died: str) -> ProblemCheckRecord:
    """A ``problem_check`` worker's record; ``died`` says why when the worker gave none."""
    if record is None:
        failed = ProblemCheckRecord()
        failed.fail("problem", died)
        return failed
    if not isinstance(record, ProblemCheckRecord):
        raise TypeError(f"a {type(record).__name__} where a problem check was expected")
    return record


def report_json(record: ProblemCheckRecord) -> dict[str, Any]:
    """The record as ``problems check --json`` prints it: every finding when the problem
    ran, ``{"ok": false, "error": message}`` when it did not."""
    if not record.ok:
        return {"ok": False, "error": record.message}
    data = record.to_dict()
    for key in ("error", "traceback"):
        data.pop(key)
    return data
