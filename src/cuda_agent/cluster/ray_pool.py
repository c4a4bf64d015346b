"""``RayPool``: the same pool on a Ray cluster (a local one, or a cluster by address).

Builds run as Ray tasks (``num_cpus=1``, on any node); device work runs in actors, one per GPU
(``num_gpus=1``: Ray pins each actor's ``CUDA_VISIBLE_DEVICES``), or one per CPU slot on the cpu
backend. Each actor serves one job at a time, so each GPU has exactly one job. Built modules
travel with the job (``artifacts``). Actors are started, and their evaluation code imported,
before the pool is returned. Raw worker tasks (``submit_worker``) run ``worker_slots`` at a time
per actor (a threaded actor); they serialise their own timing with the device lock.

Fault path: an actor that dies (its process killed, its node lost) fails the calls in flight
with ``RayActorError``; the first to notice replaces it (once) and waits until the new one is
ready, and each failed job or task runs again on the next free actor (the replacement or
another), without building again, ``retries`` times (default once). ``actor_restarts`` and
``actor_failures`` (the problem ids caught on a dying actor) say what happened, and each
result's ``details.pool_attempts`` how many device tries it took. The evaluation processes
a dead actor leaves behind (they run in sessions of their own) are killed by its watcher
(``orphans``) at once, so they cannot finish their job beside the retry or hang on.
A candidate's failure is a verdict and never retried.

A job's ``cancel`` event stays in this process (it is not sent to the actors): a job cancelled
before it took an actor does not wait for one, but one an actor is running runs to its end.

Jobs are on the pool's board (``build``, ``device-wait``, then ``device`` on ``actor<i>``:
the stages inside the actor are not reported back); a job's ``on_start`` is called in this
process when it takes an actor, and is never sent to one.

``ray`` is imported only here, and only when used. Every node needs this package installed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from cuda_agent.cluster.artifacts import pack, unpack
from cuda_agent.cluster.local import MULTICAST_OFF
from cuda_agent.cluster.orphans import Watcher
from cuda_agent.cluster.pool import (
    EvalJob,
    EvalPool,
    WorkerTaskResult,
    run_worker_task,
    with_retries,
)
from cuda_agent.core.cancel import requested
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.worker.protocol import WorkerRequest

log = logging.getLogger(__name__)
T = TypeVar("T")
ACTOR_START_TIMEOUT_S = 600.0


class DeviceActorImpl:
    """Runs ``execute`` for jobs on the device Ray gave this actor."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.watcher = Watcher()  # kills the processes started here once this actor dies
        self.env = {**(MULTICAST_OFF if backend == "cuda" else {}), **self.watcher.env}

    def ready(self) -> dict[str, Any]:
        """Import the evaluation code now (not in the first job); say where this actor runs."""
        import cuda_agent.evaluator.pipeline  # noqa: F401

        return {
            "pid": os.getpid(),
            "node": os.uname().nodename,
            "device": os.environ.get("CUDA_VISIBLE_DEVICES", "cpu"),
            "token": self.watcher.token,  # marks the processes this actor starts
        }

    def execute(self, prepared: Any, files: dict[str, bytes]) -> EvalResult:
        from cuda_agent.evaluator.pipeline import execute

        result = execute(unpack(prepared, files), env_extra=dict(self.env))
        result.details.pool_device = f"{os.uname().nodename}:" + os.environ.get(
            "CUDA_VISIBLE_DEVICES", "cpu"
        )
        return result

    def run_task(self, request: WorkerRequest, timeout_s: float) -> WorkerTaskResult:
        return run_worker_task(request, timeout_s, dict(self.env))


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
        start_timeout_s: float = 600.0,
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
        self._lock = threading.Lock()
        self._actors = [self._new_actor() for _ in range(count)]
        try:
            self._where: list[dict[str, Any]] = ray.get(
                [a.ready.remote() for a in self._actors], timeout=start_timeout_s
            )
        except ray.exceptions.GetTimeoutError:
            for actor in self._actors:
                ray.kill(actor)
            raise RuntimeError(
                f"the Ray cluster did not start {count} device actor(s) "
                f"({self._actor_options}) within {start_timeout_s:.0f} s"
            ) from None
        self._free: queue.Queue[int] = queue.Queue()
        self._task_slots: queue.Queue[int] = queue.Queue()
        for index in range(count):
            self._free.put(index)
            for _ in range(max(1, worker_slots)):
                self._task_slots.put(index)
        self._busy: set[int] = set()
        self._pending = threading.BoundedSemaphore(max_pending)
        self._executor = ThreadPoolExecutor(max_workers=max_pending, thread_name_prefix="ray-job")
        self.retries = retries
        self.actor_restarts = 0
        self.actor_failures: list[str] = []  # jobs and tasks (problem ids) whose actor died

    @property
    def devices(self) -> list[str]:
        return [f"actor{i}" for i in range(len(self._actors))]

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        run = functools.partial(self._run, job)
        return self._submit_on_board(self._executor, self._pending, job.problem.id, run)

    def submit_worker(self, request: WorkerRequest, timeout_s: float) -> Future[WorkerTaskResult]:
        self._pending.acquire()
        future = self._executor.submit(self._run_task, request, timeout_s)
        future.add_done_callback(lambda _: self._pending.release())
        return future

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for actor in self._actors:
            self._ray.kill(actor)

    # ------------------------------------------------------------------ fault drills, status

    def busy_actors(self) -> list[int]:
        """Indices of the actors running a job now."""
        with self._lock:
            return sorted(self._busy)

    def actor_where(self, index: int) -> dict[str, Any]:
        """Actor ``index``'s process id, node, device and the token that marks the processes it
        starts (``orphans.marked``), as it reported when it was ready."""
        with self._lock:
            return dict(self._where[index])

    def kill_actor(self, index: int) -> None:
        """Kill actor ``index`` as a crash would (no restart by Ray): a fault drill."""
        with self._lock:
            actor = self._actors[index]
        self._ray.kill(actor, no_restart=True)

    # ------------------------------------------------------------------ internals

    def _new_actor(self) -> Any:
        return self._actor_class.options(**self._actor_options).remote(self.backend)

    def _replace(self, index: int, dead: Any) -> None:
        """Replace actor ``index`` if it is still ``dead`` (the first caller does), then wait
        until the new one is ready."""
        with self._lock:
            if self._actors[index] is dead:
                self._ray.kill(dead, no_restart=True)  # a dead actor: nothing; a hung one: gone
                self._actors[index] = self._new_actor()
                self.actor_restarts += 1
                log.warning("Ray pool: actor %d died; replaced", index)
            fresh = self._actors[index]
        where = self._ray.get(fresh.ready.remote(), timeout=ACTOR_START_TIMEOUT_S)
        with self._lock:
            if self._actors[index] is fresh:
                self._where[index] = where

    def _call(self, index: int, call: Callable[[Any], T], name: str) -> T:
        """``call(actor)`` on actor ``index``; if the actor dies, replace it and re-raise."""
        with self._lock:
            actor = self._actors[index]
        try:
            return call(actor)
        except self._ray.exceptions.RayActorError:
            with self._lock:
                self.actor_failures.append(name)
            self._replace(index, actor)
            raise

    def _run_task(self, request: WorkerRequest, timeout_s: float) -> WorkerTaskResult:
        for attempt in range(self.retries + 1):
            index = self._task_slots.get()
            try:
                return self._call(
                    index,
                    lambda actor: self._ray.get(actor.run_task.remote(request, timeout_s)),
                    request.problem_id,
                )
            except self._ray.exceptions.RayActorError:
                if attempt == self.retries:
                    raise
            finally:
                self._task_slots.put(index)
        raise AssertionError("unreachable")

    def _run(self, job: EvalJob, ident: int) -> EvalResult:
        built: list[tuple[Any, dict[str, bytes]]] = []
        tries = 0
        remote_job = dataclasses.replace(job, on_start=None, cancel=None)  # both stay here

        def attempt() -> EvalResult:
            nonlocal tries
            if not built:  # built once: a retry after an actor died does not build again
                self.board.move(ident, "build")
                built.append(self._ray.get(self._prepare.remote(remote_job)))
            prepared, files = built[0]
            if prepared.error is not None or requested(job.cancel):  # no device stage: finish here
                from cuda_agent.evaluator.pipeline import execute

                return execute(prepared, cancel=job.cancel)
            index, got = self._wait_for_device(ident, self._free)
            tries += 1
            with self._lock:
                self._busy.add(index)
            try:
                self._took(ident, job, index)
                return self._call(
                    index,
                    lambda actor: self._ray.get(actor.execute.remote(prepared, files)),
                    job.problem.id,
                )
            finally:
                self.board.assign(ident, "")
                with self._lock:
                    self._busy.discard(index)
                self.ledger.held(f"actor{index}", got, time.monotonic())
                self._free.put(index)

        result = with_retries(attempt, job.problem.id, self.backend, self.retries)
        result.details.pool_attempts = tries
        return result

    def _took(self, ident: int, job: EvalJob, index: int) -> None:
        """The job holds actor ``index`` now: on the board, and to its ``on_start``."""
        label = f"actor{index}"
        self.board.assign(ident, label)
        self.board.move(ident, "device")
        if job.on_start is not None:
            job.on_start(label)
