"""The HTTP API's request and response bodies (pydantic models; the OpenAPI schema is theirs).

A ``Submission`` is one evaluation: the problem (one of ``id``: a bundled problem, ``source``:
the problem file's text, ``hash``: the content hash of a source submitted before), its
``size``, the solution (``text`` of a single file, or ``archive``: base64 of a workdir's
``.tar.gz`` / ``.zip``), evaluation ``options`` (``payload.CLIENT_OPTIONS``; the seed is the
service's secret), an optional ``idempotency_key`` (a resubmission with it returns the first
job) and a ``deadline_s`` after which the job fails if it has not finished.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_DEADLINE_S = 24 * 3600.0
DEFAULT_DEADLINE_S = 3600.0


class ProblemSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, max_length=200)
    source: str | None = None
    hash: str | None = Field(None, max_length=128)
    name: str | None = Field(None, max_length=100, description="a name for a source's problem")


class SolutionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, description="a KernelBench single file (ModelNew)")
    archive: str | None = Field(None, description="base64 of a workdir .tar.gz or .zip")


class Submission(BaseModel):
    model_config = ConfigDict(extra="forbid")
    problem: ProblemSpec
    solution: SolutionSpec
    size: Literal["small", "standard"] = "standard"
    options: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)
    deadline_s: float = Field(DEFAULT_DEADLINE_S, gt=0, le=MAX_DEADLINE_S)


class Batch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    jobs: list[Submission] = Field(..., min_length=1, max_length=1000)


class JobView(BaseModel):
    """A job as its tenant sees it; ``result`` is ``cuda-agent eval --json``'s object once
    ``state`` is ``done`` (without the hidden seed and the harness's paths)."""

    id: str
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    created: float
    started: float | None = None
    finished: float | None = None
    deadline: float
    attempts: int
    result: dict[str, Any] | None = None
    error: str | None = None
    idempotency_key: str | None = None
    known: bool = Field(False, description="an earlier submission with the same key")


class BatchView(BaseModel):
    jobs: list[JobView]


class Health(BaseModel):
    ok: bool
    backend: str
    isolation: str
    devices: list[str]
    jobs: dict[str, int]
