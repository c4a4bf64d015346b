"""Messages between the parent and a worker process: one request in, JSON lines out.

Every line the worker emits carries the request's ``nonce``; the parent accepts exactly one
``result`` line and ignores anything else, so a candidate printing fake JSON (to stdout, or
at exit) cannot forge a verdict. Exit codes are never trusted: no result line means failure.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

MODES = (
    "evaluate",
    "check_problem",
    "baseline_compile",
    "profile_run",
    "synth_check",
    "shape_plan",
)


@dataclass
class TimingOptions:
    enabled: bool = True
    warmup_ms: float = 25.0
    warmup_calls: int = 3
    min_rounds: int = 10
    max_rounds: int = 2000
    max_seconds: float = 10.0
    target_rse: float = 0.01
    input_sets: int = 3
    check_fraction: float = 0.25
    flush_cache: bool = True


@dataclass
class WorkerRequest:
    mode: str
    nonce: str
    backend: str
    problem_id: str
    problem_source: str
    seed: int
    solution_kind: str = ""
    solution_root: str = ""
    solution_entry: str = ""
    prebuilt_module: str | None = None
    known_build_failures: dict[str, str] = field(default_factory=dict)  # shim.failure_key -> error
    trials: int = 5
    atol: float = 1e-2
    rtol: float = 1e-2
    policy: str = "strict"
    cpu_threads: int = 1
    build_timeout_s: float = 600.0
    precision: str = "ieee"
    profile: bool = False
    ncu_kernels: int = 0
    timing: TimingOptions = field(default_factory=TimingOptions)
    result_fd: int = -1
    lock_path: str = ""  # the device's timing lock (set by the pool for shared devices)
    batch: list[dict[str, Any]] = field(default_factory=list)  # synth_check, shape_plan: sources
    window_ms: list[float] = field(default_factory=list)  # synth_check: eager runtime window
    problem_lint: bool = False  # evaluate: also lint the problem (evaluator/problem_lint.py)

    def to_json(self) -> str:
        data = dict(self.__dict__)
        data["timing"] = dict(self.timing.__dict__)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> WorkerRequest:
        data = json.loads(text)
        timing = TimingOptions(**data.pop("timing", {}))
        request = cls(timing=timing, **data)
        if request.mode not in MODES:
            raise ValueError(f"unknown worker mode {request.mode!r}")
        return request


class ResultChannel:
    """Writes nonce-tagged JSON lines to the parent's pipe (a private fd, close-on-exec)."""

    def __init__(self, fd: int, nonce: str) -> None:
        self._fd = os.dup(fd) if fd >= 0 else -1
        if fd >= 0:
            os.close(fd)
            os.set_inheritable(self._fd, False)
        self._nonce = nonce

    def send(self, kind: str, **payload: Any) -> None:
        if self._fd < 0:
            return
        line = json.dumps({"nonce": self._nonce, "type": kind, **payload}, default=_jsonable)
        data = (line + "\n").encode("utf-8")
        while data:
            written = os.write(self._fd, data)
            data = data[written:]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
