"""The HTTP API (FastAPI): submit, wait, cancel, health, metrics; the OpenAPI schema at
``/openapi.json``.

====================  ==========================================================================
``POST /v1/jobs``     one ``Submission``; 202 with the job (stored before the answer is sent)
``POST /v1/batches``  up to 1,000 submissions at once, all or none
``GET /v1/jobs/ID``   the job; ``?wait=S`` holds the answer up to S seconds (<= 300) for the result
``DELETE /v1/jobs/ID``  cancel a job that has not finished
``GET /v1/health``    backend, isolation, devices, jobs by state (no authentication)
``GET /metrics``      Prometheus text (authenticated like the jobs)
====================  ==========================================================================

Every job route needs ``Authorization: Bearer TOKEN`` when the service has tokens (401 without
one, before the body is read or checked: ``Authenticate``) and sees only its tenant's jobs
(another tenant's job is a 404). Bodies over
``max_body_bytes`` are refused with 413 before they are read whole; a submission that cannot be
evaluated as sent gets its 4xx with one line (``payload.PayloadError``) and changes nothing.

What it does not do: evaluate (``scheduler.py``) or listen (``server.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.service import metrics, payload
from cuda_agent.service.auth import Tokens
from cuda_agent.service.scheduler import Scheduler
from cuda_agent.service.schemas import Batch, BatchView, Health, JobView, Submission
from cuda_agent.service.store import Job

MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_WAIT_S = 300.0
PUBLIC_PATHS = frozenset({"/v1/health", "/openapi.json"})  # no token asked

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes gets 413 (by its Content-Length, or once
    that many bytes have arrived), and the application never sees it."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _too_large(send, self.limit)
            return
        seen = 0
        refused = False
        started = False

        async def limited() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True  # the application sees a client that went away
                    return {"type": "http.disconnect"}
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 below is the only answer
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited, watched)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            await _too_large(send, self.limit)


async def _too_large(send: Send, limit: int) -> None:
    await _answer(send, 413, f"the request body is larger than {limit} bytes")


async def _answer(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *(headers or [])],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Authenticate:
    """ASGI middleware: a request to any route but the public ones without a valid token gets
    401 before its body is read, so a caller with no valid token learns nothing of what the
    service would make of the body (422, 413, ...)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], tokens: Tokens):
        self.app, self.tokens = app, tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path") not in PUBLIC_PATHS:
            headers = dict(scope.get("headers") or [])
            header = headers.get(b"authorization")
            if self.tokens.tenant(header.decode("latin-1") if header else None) is None:
                challenge = [(b"www-authenticate", b"Bearer")]
                await _answer(send, 401, "a valid bearer token is needed", challenge)
                return
        await self.app(scope, receive, send)


def _view(job: Job, known: bool = False) -> JobView:
    return JobView(**job.view(), known=known)


def create_app(
    scheduler: Scheduler,
    tokens: Tokens,
    isolation: str,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Any:
    """The ASGI application over ``scheduler``'s store and pool."""
    store = scheduler.store
    api = FastAPI(
        title="CUDA Agent reward service",
        version="1",
        description="Submit kernel evaluations; poll or wait for their verdicts.",
        docs_url=None,
        redoc_url=None,
    )

    def tenant(authorization: str | None = Header(None)) -> str:
        found = tokens.tenant(authorization)
        if found is None:
            raise HTTPException(
                401, "a valid bearer token is needed", headers={"WWW-Authenticate": "Bearer"}
            )
        return found

    @api.exception_handler(payload.PayloadError)
    async def _payload_error(_request: Request, err: payload.PayloadError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=err.status)

    def accept(owner: str, submission: Submission) -> dict[str, Any]:
        """Check the submission and return what the store keeps of it."""
        data = submission.model_dump(exclude_none=True)
        problem_spec = data["problem"]
        problem = payload.problem_of(problem_spec, submission.size, store.problem_source)
        payload.solution_of(data["solution"])
        payload.options_of(data.get("options") or {}, scheduler.backend, scheduler.base)
        if "source" in problem_spec:
            store.remember_problem(problem.content_hash, problem.source)
        return {
            "problem": problem_spec,
            "size": submission.size,
            "solution": data["solution"],
            "options": data.get("options") or {},
        }

    def submit_one(owner: str, submission: Submission) -> JobView:
        request = accept(owner, submission)
        job, new = store.submit(owner, request, submission.deadline_s, submission.idempotency_key)
        return _view(job, known=not new)

    @api.post("/v1/jobs", status_code=202, response_model=JobView)
    def submit(submission: Submission, owner: str = Depends(tenant)) -> JobView:
        return submit_one(owner, submission)

    @api.post("/v1/batches", status_code=202, response_model=BatchView)
    def submit_batch(batch: Batch, owner: str = Depends(tenant)) -> BatchView:
        requests = [accept(owner, s) for s in batch.jobs]  # every one checked before any is kept
        views = []
        for submission, request in zip(batch.jobs, requests, strict=True):
            job, new = store.submit(
                owner, request, submission.deadline_s, submission.idempotency_key
            )
            views.append(_view(job, known=not new))
        return BatchView(jobs=views)

    @api.get("/v1/jobs/{job_id}", response_model=JobView)
    async def get_job(
        job_id: str,
        wait: float = Query(0.0, ge=0.0, le=MAX_WAIT_S),
        owner: str = Depends(tenant),
    ) -> JobView:
        if wait > 0:
            job = await asyncio.to_thread(store.wait_final, owner, job_id, wait)
        else:
            job = store.get(owner, job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return _view(job)

    @api.delete("/v1/jobs/{job_id}", response_model=JobView)
    def cancel(job_id: str, owner: str = Depends(tenant)) -> JobView:
        job = scheduler.cancel(owner, job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return _view(job)

    @api.get("/v1/health", response_model=Health)
    def health() -> Health:
        return Health(
            ok=True,
            backend=scheduler.backend,
            isolation=isolation,
            devices=scheduler.pool.devices,
            jobs=store.counts(),
        )

    @api.get("/metrics", response_class=PlainTextResponse)
    def prometheus(owner: str = Depends(tenant)) -> str:
        return metrics.render(scheduler)

    @api.exception_handler(CudaAgentError)
    async def _agent_error(_request: Request, err: CudaAgentError) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=400)

    return Authenticate(BodyLimit(api, max_body_bytes), tokens)
