"""The run folder's records: one JSON line per finished attempt in ``results.jsonl``.

A record holds the problem's id and level, the attempt number, where the solution came from,
the evaluation (``EvalResult.to_dict()`` on disk, an ``EvalResult`` in memory: parsed once, where
the line is read), the trajectory file of an agent attempt (relative to
the run folder) and the wall time. Records are appended as attempts finish, so a crash loses
nothing and a rerun skips what is done. Per problem, the *chosen* attempt is the best correct
one (highest speed-up vs torch.compile, then vs eager), as the paper reports the best solution.
A result may carry the problem's task lint (``problem_flags``, see
``evaluator/checks/task_lint.py``).

``started.jsonl`` beside it gets a line the moment an attempt starts (a job takes its device; an
agent episode begins): an attempt started but with no record was cut off (the run was killed or
stopped at a deadline while it ran), and a rerun queues such attempts last (``bench/run.py``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cuda_agent.core.jsonl import append_line, read_lines
from cuda_agent.core.types import EvalResult

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"
STARTED_FILE = "started.jsonl"
_STARTED_LOCK = threading.Lock()  # pool threads append starts concurrently


@dataclass
class AttemptRecord:
    problem_id: str
    level: int | None
    attempt: int
    source: str  # "solutions" or "agent"
    result: EvalResult
    solution: str | None = None
    trajectory: str | None = None
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.result.correct

    @property
    def problem_flags(self) -> list[str] | None:
        """The problem's task lint findings (``[]``: clean), or None where not known."""
        return self.result.problem_flags

    def rank(self) -> tuple[bool, float, float]:
        r = self.result
        return (self.correct, r.speedup_compile or 0.0, r.speedup_eager or 0.0)

    def to_dict(self) -> dict[str, Any]:
        """The record's line in ``results.jsonl``."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {**out, "result": self.result.to_dict()}

    @classmethod
    def from_dict(cls, row: dict[str, Any]) -> AttemptRecord:
        """A line of ``results.jsonl``; TypeError or KeyError where it is not a record."""
        result = row["result"]
        if not isinstance(result, dict):
            raise TypeError("the record's result is not an object")
        return cls(**{**row, "result": EvalResult.from_dict(result)})


def append_record(run_dir: Path, record: AttemptRecord) -> None:
    append_line(run_dir / RESULTS_FILE, record.to_dict())


def read_records(run_dir: Path) -> list[AttemptRecord]:
    records = []
    for row in read_lines(run_dir / RESULTS_FILE):
        try:
            records.append(AttemptRecord.from_dict(row))
        except (TypeError, KeyError):
            continue  # not a record of ours: that attempt is simply run again
    return records


def append_started(run_dir: Path, problem_id: str, attempt: int, where: str) -> None:
    """Record at once that an attempt started (``where``: its device, or ``episode``)."""
    line = {"problem_id": problem_id, "attempt": attempt, "where": where, "at": time.time()}
    with _STARTED_LOCK:
        append_line(run_dir / STARTED_FILE, line)


def read_started(run_dir: Path) -> Counter[tuple[str, int]]:
    """How many times each (problem id, attempt) was started, over every run in the folder."""
    starts: Counter[tuple[str, int]] = Counter()
    for row in read_lines(run_dir / STARTED_FILE):
        problem_id, attempt = row.get("problem_id"), row.get("attempt")
        if isinstance(problem_id, str) and isinstance(attempt, int):
            starts[(problem_id, attempt)] += 1
    return starts


def chosen_attempts(records: list[AttemptRecord]) -> dict[str, AttemptRecord]:
    """Per problem, the best attempt (correct first, then the highest speed-ups)."""
    best: dict[str, AttemptRecord] = {}
    for record in records:
        current = best.get(record.problem_id)
        if current is None or record.rank() > current.rank():
            best[record.problem_id] = record
    return best


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    """``run.json``, replaced whole (a command killed while writing leaves the old one)."""
    staging = run_dir / f".{RUN_FILE}.{os.getpid()}"
    staging.write_text(json.dumps(info, indent=1, default=str), encoding="utf-8")
    os.replace(staging, run_dir / RUN_FILE)


def read_run_info(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_FILE
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else {}


def isolation_summary(records: list[AttemptRecord]) -> str:
    """``landlock+netns (227)``, or ``NONE: 12 of 227 ran unsandboxed (--allow-unsandboxed);
    bwrap (215)``: the isolation the run's candidates ran under, unsandboxed ones first."""
    counts: dict[str, int] = {}
    for record in records:
        name = record.result.details.isolation or "not recorded"
        counts[name] = counts.get(name, 0) + 1
    parts = [f"{name} ({n})" for name, n in sorted(counts.items()) if name != "none"]
    if counts.get("none"):
        head = f"NONE: {counts['none']} of {len(records)} ran unsandboxed (--allow-unsandboxed)"
        return "; ".join([head, *parts])
    return ", ".join(parts) or "not recorded"
