"""The reward service as an evaluation pool: ``bench run --service URL`` and the RL adapters.

``ServicePool(url)`` is an ``EvalPool`` whose ``submit`` sends the job to a reward service
(``client.ServiceClient`` on an event loop of its own thread) and returns a future of its
``EvalResult``; ``service_evaluator(url)`` is the same as a plain evaluator function (what
``KernelEnvironment``, the TRL and verl adapters and ``rl.verl.evaluation_config`` take). The token
comes from ``CUDA_AGENT_TOKEN`` unless given. A job the service ends without a result (failed,
cancelled, its deadline passed) comes back as an incorrect result with ``error.stage``
``internal`` and the flag ``service_failed``, so a trainer's batch never stops on one job.

What it does not do: raw worker requests (``submit_worker``: dataset synthesis needs a local
or Ray pool), or progress per stage (the service reports only the job's state).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

import httpx

from cuda_agent.cluster.pool import EvalJob, EvalPool, WorkerTaskResult
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.service.client import (
    TOKEN_ENV,
    ServiceClient,
    ServiceFailed,
    ServiceRefused,
    client_options,
)

_T = TypeVar("_T")


def failed_result(problem: Problem, backend: str, reason: str) -> EvalResult:
    result = EvalResult(problem_id=problem.id, backend=backend)
    result.error = StageError("internal", reason)
    result.flags.append("service_failed")
    return result


class ServicePool(EvalPool):
    """An ``EvalPool`` backed by a reward service (see the module docstring)."""

    measures_devices = False

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 3600.0) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="service-client", daemon=True
        )
        self._thread.start()
        self._client = self._run(
            _make_client(url, token if token is not None else os.environ.get(TOKEN_ENV))
        ).result()
        try:
            self._health = self._run(self._client.health()).result()
        except (httpx.HTTPError, ServiceRefused) as err:
            self.close()
            raise CudaAgentError(f"cannot reach the reward service at {url}: {err}") from None
        self.backend = str(self._health.get("backend"))
        self.isolation = str(self._health.get("isolation"))

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    @property
    def devices(self) -> list[str]:
        return [f"{self.url}#{d}" for d in self._health.get("devices") or []]

    def submit(self, job: EvalJob) -> Future[EvalResult]:
        ident = self.board.add(job.problem.id)
        self.board.move(ident, "service")
        future = self._run(self._evaluate(job.problem, job.solution, job.options))
        future.add_done_callback(lambda _: self.board.finish(ident))
        return future

    async def _evaluate(
        self, problem: Problem, solution: Solution, options: EvalOptions
    ) -> EvalResult:
        try:
            return await self._client.evaluate(
                problem, solution, client_options(options), timeout_s=self.timeout_s
            )
        except (ServiceFailed, TimeoutError) as err:
            return failed_result(problem, self.backend, str(err))

    def submit_worker(self, request: WorkerRequest, timeout_s: float) -> Future[WorkerTaskResult]:
        raise NotImplementedError(
            "the reward service runs evaluations, not raw worker requests: dataset synthesis "
            "needs a local or Ray pool"
        )

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.close()).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)


async def _make_client(url: str, token: str | None) -> ServiceClient:
    return ServiceClient(url, token)  # made on the loop that will use it


_SHARED: dict[str, ServicePool] = {}
_SHARED_LOCK = threading.Lock()


def service_evaluator(url: str) -> Any:
    """The process's shared ``ServicePool`` for ``url``, as an evaluator function."""
    with _SHARED_LOCK:
        pool = _SHARED.get(url)
        if pool is None:
            pool = _SHARED[url] = ServicePool(url)
    return pool.evaluate
