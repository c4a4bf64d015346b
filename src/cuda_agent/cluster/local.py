"""``LocalPool``: the pool on one machine: CPU build threads, one worker process per device.

Each job's thread builds (``prepare``, limited to ``build_workers`` at a time), then takes a
device from the free list, runs ``execute`` with that device pinned (``CUDA_VISIBLE_DEVICES``),
and gives the device back: one job per GPU at a time, or ``jobs_per_device`` jobs whose workers
share it through its lock file (``evaluator/worker/device_turn.py``: verification and the
memory check under the shared turn, timing under the exclusive one, run-time compiles outside
it). Spare workers keep a warm process ready per
device. ``submit`` blocks once ``max_pending`` jobs are queued (back-pressure). A job's
``cancel`` reaches its ``execute`` in this process (its workers are killed, its device given
back); a job cancelled before it took a device does not wait for one.
On the cpu backend the "devices" are evaluation slots (default one: timings on a shared CPU
would disturb each other). Raw worker tasks (``submit_worker``) take ``worker_slots`` per
device; they serialise their own timing with the device lock. The job board says which job holds
which device (``GPU 0``, ``cpu0``); a job's ``on_start`` is called when it takes its device.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from cuda_agent.cluster.pool import (
    EvalJob,
    EvalPool,
    WorkerTaskResult,
    run_worker_task,
    with_retries,
)
from cuda_agent.core.cancel import requested
from cuda_agent.core.locks import device_lock_path, ensure_lock_files
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import execute, prepare
from cuda_agent.evaluator.prewarm import prewarm
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.workspace.memory_cap import set_concurrent_workers

MULTICAST_OFF = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def visible_gpus() -> list[str]:
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no CUDA here
        return []


class LocalPool(EvalPool):
    def __init__(
        self,
        backend: str,
        devices: list[str] | None = None,
        build_workers: int | None = None,
        max_pending: int = 256,
        retries: int = 1,
        worker_slots: int = 1,
        allow_unsandboxed: bool = False,
        jobs_per_device: int = 1,
    ) -> None:
        self.backend = backend
        self.isolation = prewarm(backend, allow_unsandboxed)  # before any thread starts
        if devices is None:
            devices = visible_gpus() if backend == "cuda" else ["cpu0"]
        if not devices:
            raise RuntimeError("the cuda backend needs at least one visible GPU")
        self._devices = list(devices)
        self._free: queue.Queue[str] = queue.Queue()
        self.jobs_per_device = max(1, jobs_per_device)
        # the default memory cap of each worker is this host's share split among them
        set_concurrent_workers(len(self._devices) * self.jobs_per_device)
        for _ in range(self.jobs_per_device):
            for device in self._devices:
                self._free.put(device)
        self._task_slots: queue.Queue[str] = queue.Queue()
        for _ in range(max(1, worker_slots)):
            for device in self._devices:
                self._task_slots.put(device)
        self._builds = threading.Semaphore(build_workers or max(1, (os.cpu_count() or 2) - 1))
        self._pending = threading.BoundedSemaphore(max_pending)
        self._executor = ThreadPoolExecutor(max_workers=max_pending, thread_name_prefix="eval-job")
        self.retries = retries
        self.busy: dict[str, int] = {d: 0 for d in self._devices}  # peak concurrent jobs
        self._running: dict[str, int] = {d: 0 for d in self._devices}
        self._lock = threading.Lock()

    @property
    def devices(self) -> list[str]:
        return list(self._devices)

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        run = functools.partial(self._run, job)
        return self._submit_on_board(self._executor, self._pending, job.problem.id, run)

    def submit_worker(self, request: WorkerRequest, timeout_s: float) -> Future[WorkerTaskResult]:
        run = functools.partial(self._run_task, request, timeout_s)
        return self._submit_on_board(self._executor, self._pending, request.problem_id, run)

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def _run_task(self, request: WorkerRequest, timeout_s: float, ident: int) -> WorkerTaskResult:
        self.board.move(ident, "device-wait")
        device = self._task_slots.get()
        self.board.move(ident, request.mode)
        self.board.assign(ident, self._label(device))
        try:
            return run_worker_task(request, timeout_s, self._env(device))
        finally:
            self.board.assign(ident, "")
            self._task_slots.put(device)

    def _run(self, job: EvalJob, ident: int) -> EvalResult:
        def moved(stage: str, _text: str) -> None:
            self.board.move(ident, stage)

        options = self._shared_deadlines(job.options)

        def attempt() -> EvalResult:
            self.board.move(ident, "build-wait")
            with self._builds:
                prepared = prepare(job.problem, job.solution, options, moved)
            if prepared.error is not None or requested(job.cancel):  # no device for either
                return execute(prepared, cancel=job.cancel)
            device, got = self._wait_for_device(ident, self._free)
            try:
                with self._lock:
                    self._running[device] += 1
                    self.busy[device] = max(self.busy[device], self._running[device])
                self._took(ident, job, device)
                result = execute(
                    prepared, moved, self._env(device), self._turns_file(device), job.cancel
                )
                result.details.pool_device = device
                return result
            finally:
                self.board.assign(ident, "")
                with self._lock:
                    self._running[device] -= 1
                self.ledger.held(device, got, time.monotonic())
                self._free.put(device)

        return with_retries(attempt, job.problem.id, self.backend, self.retries)

    def _took(self, ident: int, job: EvalJob, device: str) -> None:
        """The job holds ``device`` now: on the board, and to its ``on_start``."""
        label = self._label(device)
        self.board.assign(ident, label)
        self.board.move(ident, "start")
        if job.on_start is not None:
            job.on_start(label)

    def _label(self, device: str) -> str:
        """``GPU 0`` on the cuda backend, the slot's name (``cpu0``) on the cpu backend."""
        return f"GPU {device}" if self.backend == "cuda" else device

    def _shared_deadlines(self, options: EvalOptions) -> EvalOptions:
        """A worker sharing its GPU may wait for the others' turns (each up to its own
        deadline) before and during its own: its timeouts grow by that factor, so waiting
        never times a job out. The device budget does not grow: its clock stands while the
        worker waits for a turn (``worker_process.Deadline``), so it counts the candidate's own
        time, and a candidate whose kernel never ends is stopped after its budget, not after
        jobs x the budget while every other job on the GPU waits. What is measured is
        unchanged."""
        if self.jobs_per_device == 1:
            return options
        factor = self.jobs_per_device
        return dataclasses.replace(
            options,
            worker_timeout_s=options.worker_timeout_s * factor,
            baseline_timeout_s=options.baseline_timeout_s * factor,
            memory_check_timeout_s=options.memory_check_timeout_s * factor,
        )

    def _turns_file(self, device: str) -> str:
        """The device's lock file when jobs share it (its workers take turns), else none."""
        if self.jobs_per_device == 1:
            return ""
        path = device_lock_path(self.backend, self._env(device).get("CUDA_VISIBLE_DEVICES"))
        return str(ensure_lock_files(path))

    def _env(self, device: str) -> dict[str, str]:
        if self.backend != "cuda":
            return {}
        return {"CUDA_VISIBLE_DEVICES": device, **MULTICAST_OFF}
