"""What a worker process answers: one record class per worker mode.

A worker (``evaluator/worker``) fills the record of its mode and sends it as its one
``result`` line (``to_dict``); the parent parses the line once, where it reads the pipe
(``evaluator/launch/worker_process.py``, ``parse_record``), and everything above reads
attributes. Every record has ``ok`` and one error shape, a ``StageError`` (``{"stage",
"message"}`` on the wire); a worker that failed inside the harness itself answers its mode's
record with stage ``internal`` and a ``traceback``.

The items inside a batch mode's record (``synth_check``'s verdicts, ``shape_plan``'s plans) stay
JSON objects: they are also streamed as events and stored as they are. This module holds data
only: no torch, nothing that runs a worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from cuda_agent.core.details import worker_profile

R = TypeVar("R", bound="WorkerRecord")


@dataclass(frozen=True)
class StageError:
    """Why an evaluation stopped: the stage that failed and an agent-readable message."""

    stage: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "message": self.message}


@dataclass
class WorkerRecord:
    """The part every mode's record shares: whether the mode finished, and why not."""

    MODE: ClassVar[str] = ""

    ok: bool = False
    error: StageError | None = None
    traceback: str | None = None  # an internal error's last frames (``worker/__main__``)

    def fail(self, stage: str, message: str) -> None:
        """Record that the mode stopped at ``stage``."""
        self.ok = False
        self.error = StageError(stage, message)

    @property
    def message(self) -> str:
        """The error's text ("" without an error)."""
        return self.error.message if self.error is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """The record as the worker sends it (its ``result`` line, without nonce and type)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["error"] = self.error.to_dict() if self.error is not None else None
        return data

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        """The record in a result line; keys it does not know (nonce, type) are left out."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["error"] = parse_stage_error(values.get("error"))
        return cls(**values)


def parse_stage_error(value: Any) -> StageError | None:
    """A stage error as a line holds it (an object, a bare message, or null)."""
    if value is None or isinstance(value, StageError):
        return value
    if isinstance(value, dict):
        return StageError(str(value.get("stage", "internal")), str(value.get("message", "")))
    return StageError("internal", str(value))


@dataclass
class EvaluationRecord(WorkerRecord):
    """What an ``evaluate`` worker returns.

    The worker fills it as the evaluation goes; ``EvalResult.record`` carries it whole and
    ``EvalResult.to_dict`` shows its ``DETAILS`` fields under ``details`` (the ``--json``
    contract). Optional parts stay None when the evaluation stopped before them. ``ok`` is
    True when no stage stopped the evaluation (``error`` is None).
    """

    # the fields ``EvalResult.to_dict`` shows under ``details`` by the same names
    DETAILS: ClassVar[tuple[str, ...]] = (
        "device",
        "verify",
        "timing",
        "custom_calls_per_forward",
        "kernels",
        "profile",
        "worker_phases_s",
        "device_turns_given_up",
        "precision",
        "module_mode",
        "notes",
        "weight_probe",
    )
    MODE: ClassVar[str] = "evaluate"

    compiled: bool = False
    correct: bool = False
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runtime_us: float | None = None
    eager_us: float | None = None
    device: dict[str, Any] | None = None
    precision: str | None = None
    module_mode: str | None = None  # "train" or "eval": the mode the reference ran in
    builds: list[dict[str, Any]] = field(default_factory=list)
    verify: dict[str, Any] | None = None
    custom_calls_per_forward: float | None = None
    weight_probe: dict[str, Any] | None = None
    kernels: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    problem_lint: dict[str, Any] | None = None
    worker_phases_s: dict[str, float] = field(default_factory=dict)
    device_turns_given_up: int | None = None  # times a shared GPU was left while compiling
    # the device names of the candidate's own kernels (those its compiled modules register
    # and the Triton kernels the harness launched): what the memory check instruments
    kernel_symbols: list[str] | None = None

    def fail(self, stage: str, message: str, flags: list[str] | tuple[str, ...] = ()) -> None:
        """Record a failing verdict at ``stage`` (its flags added once each)."""
        super().fail(stage, message)
        self.flags.extend(f for f in flags if f not in self.flags)
        self.correct = False

    def note(self, name: str, text: str) -> None:
        """A warning-level finding: its name in ``notes``, its text in ``warnings`` (once)."""
        if name not in self.notes:
            self.notes.append(name)
            self.warnings.append(f"{name}: {text}")

    def shown_details(self) -> dict[str, Any]:
        """The ``DETAILS`` fields that are set, as ``details`` shows them."""
        return {k: getattr(self, k) for k in self.DETAILS if getattr(self, k) is not None}

    @classmethod
    def from_details(cls, result: dict[str, Any]) -> EvaluationRecord | None:
        """The record an ``EvalResult.to_dict()`` shows (None when it shows no worker's part):
        its ``DETAILS`` fields and the verdict's own. Builds stay in the parent's details."""
        details = result.get("details") or {}
        shown = {k: details[k] for k in cls.DETAILS if k in details}
        shown.pop("profile", None)
        if (profile := worker_profile(details)) is not None:
            shown["profile"] = profile
        if not shown:
            return None
        return cls.from_dict(
            {
                **shown,
                "ok": result.get("error") is None,
                "compiled": bool(result.get("compiled")),
                "correct": bool(result.get("correct")),
                "runtime_us": result.get("runtime_us"),
                "eager_us": result.get("eager_us"),
            }
        )


@dataclass
class ProblemCheckRecord(WorkerRecord):
    """``problem_check``: the problem ran; its shapes, size, speed and task lint."""

    MODE: ClassVar[str] = "problem_check"

    inputs: str = ""  # the shapes, as ``describe_shapes`` writes them
    outputs: str = ""
    parameters: int = 0
    forward_ms: float | None = None
    lint: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    device: dict[str, Any] | None = None


@dataclass
class CompileBaselineRecord(WorkerRecord):
    """``compile_baseline``: ``torch.compile`` of the reference timed against eager."""

    MODE: ClassVar[str] = "compile_baseline"

    ratio: float | None = None
    compile_us: float | None = None
    eager_us: float | None = None
    compile_seconds: float | None = None
    matches_eager: bool | None = None
    timing: dict[str, Any] | None = None
    device: dict[str, Any] | None = None
    precision: str | None = None
    profile: dict[str, Any] | None = None


@dataclass
class NcuProfileRecord(WorkerRecord):
    """``ncu_profile``: the profiled calls ran (the metrics are in Nsight Compute's log)."""

    MODE: ClassVar[str] = "ncu_profile"


@dataclass
class SynthCheckRecord(WorkerRecord):
    """``synth_check``: one verdict per candidate problem of the batch (``{"id", "accepted",
    "filter", "reason", ...}``, also streamed as ``verdict`` events)."""

    MODE: ClassVar[str] = "synth_check"

    verdicts: list[dict[str, Any]] = field(default_factory=list)
    device: dict[str, Any] | None = None


@dataclass
class ShapePlanRecord(WorkerRecord):
    """``shape_plan``: one plan per source of the batch (``{"id", "ok", ...}``, see
    ``worker/modes/shape_plan.py``) and the memory the device has free for tensors."""

    MODE: ClassVar[str] = "shape_plan"

    plans: list[dict[str, Any]] = field(default_factory=list)
    memory_bytes: int | None = None
    device: dict[str, Any] | None = None


@dataclass
class MemoryCheckRecord(WorkerRecord):
    """``memory_check``: the candidate's one call under the checker, and whether its output
    still matched (the checker's own report is read from its log by the parent)."""

    MODE: ClassVar[str] = "memory_check"

    output_ok: bool | None = None
    output_message: str = ""
    # only when ``output_ok`` is False: the output, the fill still on, on the inputs and weights
    # that verification used (None: not run); True says the check's own seed found a wrong
    # kernel, not a read of memory never written
    verified_inputs_ok: bool | None = None
    phases_s: dict[str, float] = field(default_factory=dict)  # wall seconds per phase


RECORDS: dict[str, type[WorkerRecord]] = {
    cls.MODE: cls
    for cls in (
        EvaluationRecord,
        ProblemCheckRecord,
        CompileBaselineRecord,
        NcuProfileRecord,
        SynthCheckRecord,
        ShapePlanRecord,
        MemoryCheckRecord,
    )
}


def parse_record(mode: str, data: dict[str, Any]) -> WorkerRecord:
    """The record of ``mode`` in a worker's result line."""
    return RECORDS[mode].from_dict(data)


def empty_record(mode: str) -> WorkerRecord:
    """A new record of ``mode`` (the worker fills it)."""
    return RECORDS[mode]()
