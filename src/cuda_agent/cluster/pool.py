"""The pool interface: ``submit(job) -> Future[EvalResult]``, and what every pool shares.

A job is one evaluation (problem, solution, options). Pools split it the same way: ``prepare``
(static check and build: CPU only) then ``execute`` (the worker process, on one device).
Infrastructure failures (an exception inside the pool, or an ``internal`` stage error) are
retried; a candidate's failure is a verdict and never retried.

A job's ``cancel`` event stops it wherever it is (``pipeline.execute`` kills its workers); a
cancelled job's result is a verdict of stage ``cancelled``, never retried.

Pools also run raw worker requests on their devices (``submit_worker``): the dataset
synthesiser's checks use it. Several such tasks may share a device (``worker_slots``); the
worker itself takes the device's timing lock (``device_lock``) around anything it measures.
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cuda_agent.cluster.board import JobBoard
from cuda_agent.cluster.ledger import DeviceLedger
from cuda_agent.core.locks import device_lock_path, ensure_lock_files
from cuda_agent.core.paths import ensure_dir, scratch_dir
from cuda_agent.core.records import StageError, WorkerRecord
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.workspace.isolation import IsolationUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class EvalJob:
    problem: Problem
    solution: Solution
    options: EvalOptions
    # called with the device's label when the job takes its device, before any device work
    # (``bench run`` records it: bench/run.py); pools that cannot tell never call it, and it
    # is never sent to another process
    on_start: Callable[[str], None] | None = field(default=None, compare=False, repr=False)
    # set it to stop the job: one waiting for a build or a device skips them, one running has
    # its workers killed (its result then has ``error.stage`` ``cancelled``) where the pool runs
    # it in this process (``LocalPool``; ``RayPool`` only skips a job not yet on an actor); it
    # is never sent to another process
    cancel: threading.Event | None = field(default=None, compare=False, repr=False)


@dataclass
class WorkerTaskResult:
    """What a raw worker request gave: its record (None if the worker died) and events."""

    record: WorkerRecord | None
    events: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    device: str = ""


class EvalPool(ABC):
    """Evaluate many jobs concurrently; results come back as futures."""

    measures_devices = True  # its ledger sees the devices (a remote service's pool does not)

    @abstractmethod
    def submit(self, job: EvalJob) -> Future[EvalResult]: ...

    @abstractmethod
    def submit_worker(
        self, request: WorkerRequest, timeout_s: float
    ) -> Future[WorkerTaskResult]: ...

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def devices(self) -> list[str]: ...

    @property
    def board(self) -> JobBoard:
        """What each job of this pool is doing now (for progress reports)."""
        board = self.__dict__.get("_board")
        if board is None:
            board = self.__dict__["_board"] = JobBoard()
        return board

    @property
    def ledger(self) -> DeviceLedger:
        """Queue waits and device holds of this pool's jobs (``cluster/ledger.py``)."""
        ledger = self.__dict__.get("_ledger")
        if ledger is None:
            ledger = self.__dict__["_ledger"] = DeviceLedger()
        return ledger

    def attach_board(self, board: JobBoard) -> None:
        """Report into ``board`` (shared by several pools of one run)."""
        self.__dict__["_board"] = board

    def evaluate(self, problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
        """One job, submitted and waited for: an evaluator function (``pipeline.evaluate``'s
        signature) for callers that take one."""
        return self.submit(EvalJob(problem, solution, options)).result()

    def _submit_on_board(
        self,
        executor: Executor,
        pending: threading.BoundedSemaphore,
        problem_id: str,
        run: Callable[[int], T],
    ) -> Future[T]:
        """``run(ident)`` on ``executor`` once one of the ``pending`` slots is free (this blocks
        until then), ``ident`` being the problem's new entry on the ``board``; the entry is
        finished and the slot freed when the future is done."""
        pending.acquire()
        ident = self.board.add(problem_id)
        future = executor.submit(run, ident)

        def release(_: Future[T]) -> None:
            self.board.finish(ident)
            pending.release()

        future.add_done_callback(release)
        return future

    def _wait_for_device(self, ident: int, free: queue.Queue[T]) -> tuple[T, float]:
        """The next device of ``free`` for job ``ident`` (on the board as ``device-wait`` until
        then), and when it came (``time.monotonic``); the wait goes into the ledger."""
        self.board.move(ident, "device-wait")
        waited = time.monotonic()
        device = free.get()
        got = time.monotonic()
        self.ledger.wait(got - waited)
        return device, got

    def __enter__(self) -> EvalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_retries(
    run: Callable[[], EvalResult], problem_id: str, backend: str, retries: int
) -> EvalResult:
    """``run()``, again on infrastructure failures, at most ``retries`` more times."""
    last = ""
    for attempt in range(retries + 1):
        try:
            result = run()
        except IsolationUnavailable:
            raise  # a refusal, not a failure: retrying cannot help
        except Exception as err:  # the pool's own failure, not the candidate's
            last = f"{type(err).__name__}: {err}"
            log.warning(
                "evaluation of %s failed in the pool (attempt %d): %s",
                problem_id,
                attempt + 1,
                last,
            )
            continue
        if result.error is not None and result.error.stage == "internal" and attempt < retries:
            last = result.error.message
            continue
        return result
    failed = EvalResult(problem_id=problem_id, backend=backend)
    failed.error = StageError("internal", f"the evaluation pool failed: {last}")
    failed.flags.append("pool_failure")
    return failed


def run_worker_task(
    request: WorkerRequest, timeout_s: float, env_extra: dict[str, str]
) -> WorkerTaskResult:
    """Run ``request`` in a fresh sandboxed worker on the device ``env_extra`` selects."""
    from cuda_agent.evaluator.launch.worker_process import run_worker
    from cuda_agent.evaluator.launch.worker_spawn import worker_env
    from cuda_agent.workspace.memory_cap import host_cap_bytes

    visible = env_extra.get("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
    lock = ensure_lock_files(device_lock_path(request.settings.backend, visible))
    request.lock_path = str(lock)
    scratch = ensure_dir(scratch_dir()) / f"task-{secrets.token_hex(6)}"
    try:
        outcome = run_worker(
            request,
            timeout_s=timeout_s,
            scratch=scratch,
            env=worker_env(env_extra),
            sandboxed=True,
            host_memory_cap=host_cap_bytes(request.settings.backend),
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    error = ""
    if outcome.record is None:
        tail = outcome.stderr_tail.strip().splitlines()[-1:] or [""]
        error = f"the worker {outcome.death_reason()} {tail[0]}".strip()
    return WorkerTaskResult(
        outcome.record, outcome.events, error, visible or request.settings.backend
    )
