"""Messages between the parent and a worker process: one request in, JSON lines out.

Every line the worker emits carries the request's ``nonce``; the parent accepts exactly one
``result`` line and ignores anything else, so a candidate printing fake JSON (to stdout, or
at exit) cannot forge a verdict. Exit codes are never trusted: no result line means failure.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.policy import DEFAULT_POLICY, Policy, parse_policy
from cuda_agent.core.records import RECORDS
from cuda_agent.core.types import BACKENDS
from cuda_agent.evaluator.worker.policies import PRECISIONS

MODES = tuple(RECORDS)  # one record class per mode (core/records.py)


MAX_TIMED_ROUNDS = 4096  # each timed round gets a scale factor no other call gets (timing.Factors)


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
class EvalSettings:
    """What an evaluation decides that the parent and the worker share, validated once.

    The CLI builds it (inside ``EvalOptions``, which adds what only the parent uses), every
    worker request carries it unchanged (``WorkerRequest.settings``), and the worker reads it
    there. A new option of this kind is a field here and a flag of the command line.
    ``atol`` / ``rtol`` of None mean the problem's own tolerance (resolved by
    ``evaluator.launch.requests.worker_request``).
    """

    backend: str = "cpu"
    trials: int = 5
    atol: float | None = None
    rtol: float | None = None
    policy: Policy = DEFAULT_POLICY
    precision: str = "ieee"
    cpu_threads: int = 1
    build_timeout_s: float = 600.0
    profile: bool = False
    timing: TimingOptions = field(default_factory=TimingOptions)

    def validate_settings(self) -> None:
        """Raise ``ConfigError`` with one line saying which value is unusable."""
        if self.backend not in BACKENDS:
            raise ConfigError(
                f"unknown backend {self.backend!r} (choose from {', '.join(BACKENDS)})"
            )
        self.policy = parse_policy(self.policy)  # a name given as a plain str becomes one
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"unknown precision policy {self.precision!r} (choose from {', '.join(PRECISIONS)})"
            )
        if not 1 <= self.trials <= 100:
            raise ConfigError("trials must be between 1 and 100")
        if not 1 <= self.timing.max_rounds <= MAX_TIMED_ROUNDS:
            raise ConfigError(f"timing.max_rounds must be between 1 and {MAX_TIMED_ROUNDS}")
        for name in ("atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ConfigError(f"{name} must be >= 0")

    def shared(self) -> EvalSettings:
        """These settings alone (a copy), without the fields a subclass adds."""
        values = {f.name: getattr(self, f.name) for f in fields(EvalSettings)}
        values["timing"] = replace(self.timing)
        return EvalSettings(**values)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(EvalSettings)}
        data["timing"] = asdict(self.timing)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalSettings:
        values = dict(data)
        values["timing"] = TimingOptions(**values.get("timing", {}))
        values["policy"] = parse_policy(values.get("policy", DEFAULT_POLICY))
        return cls(**values)


DEFAULT_TOLERANCE = 1e-2  # the paper's atol = rtol, used when a request names none


@dataclass
class WorkerRequest:
    """One request to a worker: its mode, the settings, the problem and what the mode needs.

    Built by ``evaluator.launch.requests.worker_request`` (the one constructor), sent as one JSON
    line. The fields after ``settings`` belong to one mode or to the process that runs it.
    """

    mode: str
    nonce: str
    settings: EvalSettings
    problem_id: str
    problem_source: str
    seed: int
    solution_kind: str = ""
    solution_root: str = ""
    solution_entry: str = ""
    prebuilt_module: str | None = None
    known_build_failures: dict[str, str] = field(default_factory=dict)  # shim.failure_key -> error
    ncu_kernels: int = 0
    result_fd: int = -1
    lock_path: str = ""  # the device's timing lock (set by the pool for shared devices)
    batch: list[dict[str, Any]] = field(default_factory=list)  # synth_check, shape_plan: sources
    window_ms: list[float] = field(default_factory=list)  # synth_check: eager runtime window
    problem_lint: bool = False  # evaluate: also lint the problem (evaluator/checks/task_lint.py)
    uses_triton: bool = False  # evaluate: hook Triton's launches (worker/triton_launches.py)
    sanitizer: str = ""  # memory_check: "address" builds extensions with AddressSanitizer

    @property
    def atol(self) -> float:
        """The absolute tolerance outputs are compared with."""
        atol = self.settings.atol
        return DEFAULT_TOLERANCE if atol is None else atol

    @property
    def rtol(self) -> float:
        """The relative tolerance outputs are compared with."""
        rtol = self.settings.rtol
        return DEFAULT_TOLERANCE if rtol is None else rtol

    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["settings"] = self.settings.to_dict()
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> WorkerRequest:
        data = json.loads(text)
        settings = EvalSettings.from_dict(data.pop("settings", {}))
        request = cls(settings=settings, **data)
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
