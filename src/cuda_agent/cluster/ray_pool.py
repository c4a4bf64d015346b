"""``RayPool``: the same pool on a Ray cluster (a local one, or a cluster by address).

Builds run as Ray tasks (``num_cpus=1``, on any node); device work runs in actors, one per GPU
(``num_gpus=1``: Ray pins each actor's ``CUDA_VISIBLE_DEVICES``), or one per CPU slot on the cpu
backend. Each actor serves one job at a time, so each GPU has exactly one job. Built modules
travel with the job (``artifacts``). An actor that dies is replaced and the job retried; a
candidate's failure is a verdict. Raw worker tasks (``submit_worker``) run ``worker_slots`` at
a time per actor (a threaded actor); they serialise their own timing with the device lock.
``ray`` is imported only here, and only when used.
Every node needs this package installed.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from cuda_agent.cluster.artifacts import pack, unpack
from cuda_agent.cluster.local import MULTICAST_OFF
from cuda_agent.cluster.pool import (
    EvalJob,
    EvalPool,
    WorkerTaskResult,
    run_worker_task,
    with_retries,
)
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.worker.protocol import WorkerRequest


class DeviceActorImpl:
    """Runs ``execute`` for jobs on the device Ray gave this actor."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def execute(self, prepared: Any, files: dict[str, bytes]) -> EvalResult:
        import os

        from cuda_agent.evaluator.pipeline import execute

        env = dict(MULTICAST_OFF) if self.backend == "cuda" else {}
        result = execute(unpack(prepared, files), env_extra=env)
        result.details["pool_device"] = f"{os.uname().nodename}:" + os.environ.get(
            "CUDA_VISIBLE_DEVICES", "cpu"
        )
        return result

    def run_task(self, request: WorkerRequest, timeout_s: float) -> WorkerTaskResult:
        env = dict(MULTICAST_OFF) if self.backend == "cuda" else {}
        return run_worker_task(request, timeout_s, env)


def prepare_job(job: EvalJob) -> tuple[Any, dict[str, bytes]]:
    from cuda_agent.evaluator.pipeline import prepare

    prepared = prepare(job.problem, job.solution, job.options)
    return prepared, pack(prepared) if prepared.error is None else {}


class RayPool(EvalPool):
    def __init__(
        self,
        backend: str,
        address: str | None = None,
        workers: int | None = None,
        max_pending: int = 256,
        retries: int = 1,
        local_cpus: int | None = None,
        worker_slots: int = 1,
    ) -> None:
        import ray

        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "ignore_reinit_error": True,
            }
            if address:
                kwargs["address"] = address
            elif local_cpus:
                kwargs["num_cpus"] = local_cpus
            ray.init(**kwargs)
        self._ray = ray
        self.backend = backend
        resources = ray.cluster_resources()
        if backend == "cuda":
            count = workers or int(resources.get("GPU", 0))
            if count < 1:
                raise RuntimeError("the Ray cluster has no GPU for the cuda backend")
            self._actor_options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
        else:
            count = workers or 1
            self._actor_options = {"num_cpus": 1}
        self._actor_options["max_concurrency"] = max(1, worker_slots)
        self._actor_class = ray.remote(DeviceActorImpl)
        self._prepare = ray.remote(num_cpus=1)(prepare_job)
        self._actors = [self._new_actor() for _ in range(count)]
        self._free: queue.Queue[int] = queue.Queue()
        self._task_slots: queue.Queue[int] = queue.Queue()
        for index in range(count):
            self._free.put(index)
            for _ in range(max(1, worker_slots)):
                self._task_slots.put(index)
        self._pending = threading.BoundedSemaphore(max_pending)
        self._executor = ThreadPoolExecutor(max_workers=max_pending, thread_name_prefix="ray-job")
        self.retries = retries
        self.actor_restarts = 0

    @property
    def devices(self) -> list[str]:
        return [f"actor{i}" for i in range(len(self._actors))]

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        self._pending.acquire()
        future = self._executor.submit(self._run, job)
        future.add_done_callback(lambda _: self._pending.release())
        return future

    def submit_worker(self, request: WorkerRequest, timeout_s: float) -> Future[WorkerTaskResult]:
        self._pending.acquire()
        future = self._executor.submit(self._run_task, request, timeout_s)
        future.add_done_callback(lambda _: self._pending.release())
        return future

    def _run_task(self, request: WorkerRequest, timeout_s: float) -> WorkerTaskResult:
        index = self._task_slots.get()
        try:
            result: WorkerTaskResult = self._ray.get(
                self._actors[index].run_task.remote(request, timeout_s)
            )
            return result
        finally:
            self._task_slots.put(index)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for actor in self._actors:
            self._ray.kill(actor)

    def _new_actor(self) -> Any:
        return self._actor_class.options(**self._actor_options).remote(self.backend)

    def _run(self, job: EvalJob) -> EvalResult:
        def attempt() -> EvalResult:
            prepared, files = self._ray.get(self._prepare.remote(job))
            if prepared.error is not None:  # failed before the device stage: finish here
                from cuda_agent.evaluator.pipeline import execute

                return execute(prepared)
            index = self._free.get()
            try:
                return self._ray.get(self._actors[index].execute.remote(prepared, files))
            except self._ray.exceptions.RayActorError:
                self._actors[index] = self._new_actor()  # the worker died: replace it
                self.actor_restarts += 1
                raise
            finally:
                self._free.put(index)

        return with_retries(attempt, job.problem.id, self.backend, self.retries)
