"""The async client of the reward service (``httpx``): what trainers import.

``ServiceClient(url, token)`` submits evaluations (one, or a batch), waits for their results
(long polls of ``GET /v1/jobs/ID?wait=S``), cancels, and reads health. ``evaluate`` and
``evaluate_many`` do all of it and return ``EvalResult`` objects, the same ones a local
``evaluate`` returns (without the hidden seed). Network errors and 5xx answers are retried
with backoff (``retries``); a 4xx is the caller's mistake and raises ``ServiceRefused`` at
once with the service's one-line reason; a job that does not finish by ``timeout_s`` is
cancelled and raises ``TimeoutError``.

``submission(problem, solution, ...)`` builds the request body from the records: a bundled
problem goes by id, any other by its source text (the service remembers it, and ``by_hash``
then sends only its hash); a single-file solution as text, a workdir as a ``.tar.gz``.

What it does not do: evaluate anything locally, or keep state between calls.
"""

from __future__ import annotations

import asyncio
import base64
import io
import random
import tarfile
from collections.abc import Sequence
from typing import Any

import httpx

from cuda_agent.core.types import EvalResult, Problem, Solution, SolutionKind
from cuda_agent.problems.sets import BUNDLED

TOKEN_ENV = "CUDA_AGENT_TOKEN"
FINAL = ("done", "failed", "cancelled")


class ServiceRefused(RuntimeError):
    """The service answered 4xx: ``status`` and its one-line ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"the service refused the request ({status}): {detail}")
        self.status, self.detail = status, detail


class ServiceFailed(RuntimeError):
    """A job ended without a result (``failed`` or ``cancelled``): its error."""


# the options of ``EvalOptions`` that a submission carries (``payload.CLIENT_OPTIONS``)
SENT_OPTIONS = ("policy", "precision", "trials", "atol", "rtol", "reward", "shapes", "language")


def client_options(opts: Any) -> dict[str, Any]:
    """An ``EvalOptions``' client-side options as a submission's ``options``."""
    values: dict[str, Any] = {k: getattr(opts, k) for k in SENT_OPTIONS}
    values["reward_shapes"] = opts.reward_shapes
    values["baselines"] = list(opts.baselines)
    return {k: v for k, v in values.items() if v is not None}


def _archive(files: dict[str, str]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in sorted(files.items()):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def submission(
    problem: Problem,
    solution: Solution,
    options: dict[str, Any] | None = None,
    *,
    idempotency_key: str | None = None,
    deadline_s: float | None = None,
    by_hash: bool = False,
) -> dict[str, Any]:
    """The body of ``POST /v1/jobs`` for these records (see the module docstring)."""
    if problem.set_name == BUNDLED:
        spec: dict[str, Any] = {"id": problem.id}
    elif by_hash:
        spec = {"hash": problem.content_hash, "name": problem.id}
    else:
        spec = {"source": problem.source, "name": _name(problem.id)}
    if solution.kind is SolutionKind.SINGLE_FILE:
        sol: dict[str, Any] = {"text": solution.files[solution.entry_file]}
    else:
        sol = {"archive": _archive(solution.files)}
    body: dict[str, Any] = {
        "problem": spec,
        "solution": sol,
        "size": problem.size if problem.size in ("small", "standard") else "standard",
        "options": dict(options or {}),
    }
    if idempotency_key is not None:
        body["idempotency_key"] = idempotency_key
    if deadline_s is not None:
        body["deadline_s"] = deadline_s
    return body


def _name(problem_id: str) -> str:
    clean = "".join(c if c.isalnum() or c in "_-" else "_" for c in problem_id)
    return clean[:100] or "problem"


class ServiceClient:
    """``async with ServiceClient(url, token) as client: result = await client.evaluate(...)``."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        retries: int = 5,
        request_timeout_s: float = 60.0,
        poll_s: float = 30.0,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(
            base_url=url.rstrip("/"), headers=headers, timeout=request_timeout_s + 5.0
        )
        self.retries = retries
        self.poll_s = poll_s

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        delay = 0.5
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            else:
                if response.status_code < 400:
                    return response.json()
                if response.status_code < 500:
                    raise ServiceRefused(response.status_code, _detail(response))
                if attempt == self.retries:
                    response.raise_for_status()
            await asyncio.sleep(delay * (1 + random.random()))  # backoff before a retry
            delay = min(delay * 2, 10.0)
        raise AssertionError("unreachable")

    async def health(self) -> dict[str, Any]:
        return dict(await self._call("GET", "/v1/health"))

    async def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Submit one ``submission`` body; the job (``id``, ``state``...)."""
        return dict(await self._call("POST", "/v1/jobs", json=body))

    async def submit_batch(self, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        answer = await self._call("POST", "/v1/batches", json={"jobs": list(bodies)})
        return list(answer["jobs"])

    async def job(self, job_id: str, wait_s: float = 0.0) -> dict[str, Any]:
        params = {"wait": f"{wait_s:g}"} if wait_s > 0 else None
        return dict(await self._call("GET", f"/v1/jobs/{job_id}", params=params))

    async def cancel(self, job_id: str) -> dict[str, Any]:
        return dict(await self._call("DELETE", f"/v1/jobs/{job_id}"))

    async def wait(self, job_id: str, timeout_s: float = 3600.0) -> dict[str, Any]:
        """The job once final; cancelled and ``TimeoutError`` after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            left = deadline - loop.time()
            if left <= 0:
                await self.cancel(job_id)
                raise TimeoutError(f"job {job_id} did not finish in {timeout_s:g} s")
            job = await self.job(job_id, wait_s=min(self.poll_s, left))
            if job["state"] in FINAL:
                return job

    async def evaluate(
        self,
        problem: Problem,
        solution: Solution,
        options: dict[str, Any] | None = None,
        *,
        timeout_s: float = 3600.0,
        idempotency_key: str | None = None,
    ) -> EvalResult:
        body = submission(
            problem, solution, options, idempotency_key=idempotency_key, deadline_s=timeout_s
        )
        job = await self.submit(body)
        return _result(await self.wait(job["id"], timeout_s))

    async def evaluate_many(
        self,
        items: Sequence[tuple[Problem, Solution]],
        options: dict[str, Any] | None = None,
        *,
        timeout_s: float = 3600.0,
    ) -> list[EvalResult | ServiceFailed]:
        """A batch: one request for all, then each result (a job that ended without one gives
        its ``ServiceFailed`` in its place)."""
        bodies = [submission(p, s, options, deadline_s=timeout_s) for p, s in items]
        jobs = await self.submit_batch(bodies)
        finals = await asyncio.gather(*(self.wait(j["id"], timeout_s) for j in jobs))
        out: list[EvalResult | ServiceFailed] = []
        for job in finals:
            try:
                out.append(_result(job))
            except ServiceFailed as err:
                out.append(err)
        return out


def _result(job: dict[str, Any]) -> EvalResult:
    if job["state"] != "done" or job.get("result") is None:
        raise ServiceFailed(f"job {job['id']} {job['state']}: {job.get('error')}")
    return EvalResult.from_dict(job["result"])


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except ValueError:
        return response.text[:300]
    if isinstance(detail, list):  # pydantic's validation errors
        parts = [f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg')}" for d in detail]
        return "; ".join(parts)[:500]
    return str(detail)[:500]
