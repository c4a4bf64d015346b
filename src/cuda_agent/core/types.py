"""Plain data records passed between the parts: problems, solutions, requests and results.

These are frozen dataclasses with JSON round-trips; they hold no behaviour beyond
(de)serialisation and tiny derived properties. Loading and validation live in ``problems`` and
``solutions``; evaluation lives in ``evaluator``.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.core.details import EvalDetails
from cuda_agent.core.records import EvaluationRecord, StageError, parse_stage_error

BACKENDS = ("cpu", "cuda")
BASELINES = ("eager", "compile")


@dataclass(frozen=True)
class Tolerance:
    """Element-wise closeness: ``|cand - ref| <= atol + rtol * |ref|`` (as ``torch.allclose``)."""

    atol: float = 1e-2
    rtol: float = 1e-2


@dataclass(frozen=True)
class Problem:
    """A KernelBench-format reference problem, possibly resized.

    ``source`` is the exact Python text that is evaluated (after size overrides), and
    ``content_hash`` is the SHA-256 of that text, so two problems with equal hashes are the
    same task.
    """

    id: str
    path: Path
    source: str
    content_hash: str
    level: int | None = None
    tags: tuple[str, ...] = ()
    set_name: str = "file"
    size: str = "standard"
    precision: str = "fp32"
    tolerance: Tolerance = Tolerance()
    description: str = ""

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "level": self.level,
            "path": str(self.path),
            "set": self.set_name,
            "size": self.size,
            "tags": list(self.tags),
            "hash": self.content_hash,
            "description": self.description,
        }


class SolutionKind(str, enum.Enum):
    SINGLE_FILE = "single_file"
    WORKDIR = "workdir"


@dataclass(frozen=True)
class Solution:
    """A candidate: a KernelBench single file (``ModelNew``) or a CUDA-Agent workdir.

    ``files`` is a snapshot of the candidate's files (relative path -> text) taken when the
    solution was loaded, so later edits to the directory cannot race with an evaluation.
    """

    kind: SolutionKind
    path: Path
    files: dict[str, str]
    content_hash: str

    @property
    def entry_file(self) -> str:
        return "model_new.py" if self.kind is SolutionKind.WORKDIR else self.path.name


@dataclass
class EvalResult:
    """The verdict of one evaluation. ``to_dict`` is the CLI's ``--json`` contract.

    ``record`` is the ``evaluate`` worker's record, whole (None when no worker answered);
    ``details`` holds only what the parent adds (``EvalDetails``: hashes, seed, stage times,
    the memory check, the baselines, pools' notes). ``to_dict`` shows both under ``details``,
    as one object; ``from_dict`` parses that back, and readers use the typed fields.
    """

    problem_id: str
    backend: str
    compiled: bool = False
    correct: bool = False
    reward: float = -1.0
    runtime_us: float | None = None
    eager_us: float | None = None
    compile_us: float | None = None
    speedup_eager: float | None = None
    speedup_compile: float | None = None
    flags: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: StageError | None = None
    generalizes: bool | None = None  # --shapes: every other size passed (None: not checked)
    details: EvalDetails = field(default_factory=EvalDetails)
    problem_flags: list[str] | None = None  # the problem's task lint; None: not known
    language: str | None = None  # cuda, triton, cuda+triton or pytorch (solutions.language)
    record: EvaluationRecord | None = None

    @property
    def outcome(self) -> str:
        """``correct``, or the stage that failed (``incorrect`` where none is named)."""
        if self.correct:
            return "correct"
        return self.error.stage if self.error is not None else "incorrect"

    @property
    def builds(self) -> list[dict[str, Any]]:
        """Every build of the evaluation: the parent's, then the worker's."""
        worker = self.record.builds if self.record is not None else []
        return [*(self.details.builds or []), *worker]

    def profile(self) -> dict[str, Any]:
        """``details.profile``: the worker's kernel tables (candidate, eager) beside the parts
        the parent measured (compile, ncu); empty when nothing was profiled."""
        worker = self.record.profile if self.record is not None else None
        return {**copy.deepcopy(worker or {}), **self.details.profile()}

    def to_dict(self) -> dict[str, Any]:
        out = {
            f.name: self.shown_details()
            if f.name == "details"
            else copy.deepcopy(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "record"
        }
        out["error"] = self.error.to_dict() if self.error else None
        return out

    def shown_details(self) -> dict[str, Any]:
        """``details`` as ``to_dict`` shows it: the parent's, and the record's ``DETAILS``
        (the worker's builds after the parent's, its notes before the parent's, its profile
        beside the parts the parent measured)."""
        shown = self.details.to_dict()
        if self.record is None:
            return shown
        for key, value in copy.deepcopy(self.record.shown_details()).items():
            if key == "notes":
                shown[key] = value + [n for n in shown.get(key, []) if n not in value]
            elif key == "profile":
                shown[key] = self.profile()
            else:
                shown[key] = value
        if self.record.builds:
            shown["builds"] = copy.deepcopy(self.builds)
        return shown

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """The result ``to_dict`` (``eval --json``) gave; keys it does not know are left out.
        The record's ``DETAILS`` under ``details`` become ``record`` again (the worker's builds
        stay among the parent's)."""
        known = {f.name for f in dataclasses.fields(cls)} - {"record"}
        values = {k: v for k, v in data.items() if k in known}
        values["error"] = parse_stage_error(values.get("error"))
        for name in ("flags", "warnings"):  # an odd or older line: absent or null lists
            values[name] = [str(v) for v in values.get(name) or []]
        if not isinstance(values.get("reward"), (int, float)):
            values["reward"] = -1.0
        details = values.get("details") or {}
        parent = {k: v for k, v in details.items() if k not in EvaluationRecord.DETAILS}
        values["details"] = EvalDetails.from_dict({**parent, "profile": details.get("profile")})
        return cls(**values, record=EvaluationRecord.from_details(data))
