"""Feeds the job store to an evaluation pool and stores each result exactly once.

One thread claims queued jobs (oldest first) up to ``capacity`` in flight, turns each stored
request back into an evaluation (``payload``), bounds its deadlines by the time the job has
left, and submits it to the pool (LocalPool or RayPool: builds on the pool's CPU threads,
verification and timing on its devices). When the pool answers, the public result
(``results.public_result``) is stored under the attempt that claimed the job; an exception
from the pool queues the job again once, then fails it. ``cancel`` cancels a job in the store
and sets the cancel event its evaluation was submitted with (``EvalJob.cancel``): the pool then
kills its workers and gives its device back within about a second, and its result (verdict
``cancelled``) is dropped like any result of a cancelled job. A job cancelled between its
claim and its submission is submitted with its event already set. ``Counters`` keep what the
metrics endpoint shows (results by verdict, per-phase seconds).

What it does not do: accept or authenticate jobs (``app.py``), time anything itself, or stop a
job another service process runs on the same store (only its own evaluations' events).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field, replace

from cuda_agent.cluster.pool import EvalJob, EvalPool
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.service import payload
from cuda_agent.service.results import public_result
from cuda_agent.service.store import Job, JobStore

log = logging.getLogger(__name__)


@dataclass
class Counters:
    verdicts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    phase_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    phase_counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    finished: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, result: EvalResult) -> None:
        verdict = result.outcome
        timings = result.details.timings_s or {}
        with self.lock:
            self.finished += 1
            self.verdicts[verdict] += 1
            for phase, seconds in timings.items():
                if isinstance(seconds, (int, float)):
                    self.phase_seconds[phase] += float(seconds)
                    self.phase_counts[phase] += 1


def evaluation_of(job: Job, backend: str, base: EvalOptions, store: JobStore) -> payload.Evaluation:
    """The job's stored request as a problem, a solution and options for ``backend``."""
    request = job.request
    problem = payload.problem_of(request["problem"], request["size"], store.problem_source)
    solution = payload.solution_of(request["solution"])
    options = payload.options_of(request.get("options") or {}, backend, base)
    left = max(1.0, job.deadline - time.time())
    options = replace(
        options,
        worker_timeout_s=min(options.worker_timeout_s, left),
        build_timeout_s=min(options.build_timeout_s, left),
        baseline_timeout_s=min(options.baseline_timeout_s, left),
    )
    return payload.Evaluation(problem, solution, options)


class Scheduler:
    """Runs the store's jobs on ``pool`` (see the module docstring); ``start`` / ``stop``."""

    def __init__(
        self,
        store: JobStore,
        pool: EvalPool,
        backend: str,
        base: EvalOptions,
        capacity: int,
    ) -> None:
        self.store, self.pool, self.backend, self.base = store, pool, backend, base
        self.capacity = max(1, capacity)
        self.counters = Counters()
        self.started = time.monotonic()
        self._inflight = 0
        self._cancels: dict[str, threading.Event] = {}  # the jobs in flight, by id
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="service-scheduler", daemon=True)

    @property
    def running(self) -> int:
        with self._lock:
            return self._inflight

    def start(self) -> None:
        requeued = self.store.recover()
        if requeued:
            log.warning("%d job(s) left running by a stopped service were queued again", requeued)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self.store.changed:
            self.store.changed.notify_all()
        self._thread.join(timeout=30)

    def cancel(self, tenant: str, job_id: str) -> Job | None:
        """Cancel the job in the store and stop its evaluation if one is in flight; the job as
        stored (None: no such job of ``tenant``'s)."""
        job = self.store.cancel(tenant, job_id)
        if job is not None and job.state == "cancelled":
            with self._lock:
                event = self._cancels.get(job_id)
            if event is not None:
                event.set()
        return job

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                room = self.capacity - self._inflight
            jobs = self.store.claim(room) if room > 0 else []
            for job in jobs:
                self._submit(job)
            if not jobs:
                with self.store.changed:
                    self.store.changed.wait(1.0)

    def _submit(self, job: Job) -> None:
        try:
            evaluation = evaluation_of(job, self.backend, self.base, self.store)
        except payload.PayloadError as err:  # checked at submission; a bundle gone since
            self.store.finish(job.id, job.attempts, error=str(err))
            return
        cancel = threading.Event()
        with self._lock:
            self._inflight += 1
            self._cancels[job.id] = cancel
        if self.store.state_of(job.id) == "cancelled":  # before its event was there to set
            cancel.set()
        try:
            future = self.pool.submit(
                EvalJob(evaluation.problem, evaluation.solution, evaluation.options, cancel=cancel)
            )
        except Exception as err:
            self._done(job, None, err)
            return
        future.add_done_callback(lambda f: self._done(job, f, None))

    def _done(
        self, job: Job, future: Future[EvalResult] | None, error: BaseException | None
    ) -> None:
        with self._lock:  # before a requeue below lets the job's next attempt in
            self._cancels.pop(job.id, None)
        try:
            if future is not None:
                error = future.exception()
            if error is None and future is not None:
                verdict = future.result()
                result = public_result(verdict.to_dict())
                if self.store.finish(job.id, job.attempts, result=result):
                    self.counters.add(verdict)
            else:
                log.warning("job %s: the evaluation failed: %s", job.id, error)
                self.store.requeue(job.id, job.attempts, f"the evaluation failed: {error}")
        finally:
            with self._lock:
                self._inflight -= 1
            with self.store.changed:
                self.store.changed.notify_all()
