"""The run folder's records: one JSON line per finished attempt in ``results.jsonl``.

A record holds the problem's id and level, the attempt number, where the solution came from,
the evaluation (``EvalResult.to_dict()``), the trajectory file of an agent attempt (relative to
the run folder) and the wall time. Records are appended as attempts finish, so a crash loses
nothing and a rerun skips what is done. Per problem, the *chosen* attempt is the best correct
one (highest speed-up vs torch.compile, then vs eager), as the paper reports the best solution.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS_FILE = "results.jsonl"
RUN_FILE = "run.json"


@dataclass
class AttemptRecord:
    problem_id: str
    level: int | None
    attempt: int
    source: str  # "solutions" or "agent"
    result: dict[str, Any]
    solution: str | None = None
    trajectory: str | None = None
    wall_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return bool(self.result.get("correct"))

    def rank(self) -> tuple[bool, float, float]:
        r = self.result
        return (self.correct, r.get("speedup_compile") or 0.0, r.get("speedup_eager") or 0.0)


def append_record(run_dir: Path, record: AttemptRecord) -> None:
    path = run_dir / RESULTS_FILE
    torn = path.exists() and path.stat().st_size > 0 and _last_byte(path) != b"\n"
    with open(path, "a", encoding="utf-8") as handle:
        if torn:  # a crash cut the last line: keep the new record on a line of its own
            handle.write("\n")
        handle.write(json.dumps(asdict(record), default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


def read_records(run_dir: Path) -> list[AttemptRecord]:
    path = run_dir / RESULTS_FILE
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            records.append(AttemptRecord(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue  # a line torn by a crash: that attempt is simply run again
    return records


def chosen_attempts(records: list[AttemptRecord]) -> dict[str, AttemptRecord]:
    """Per problem, the best attempt (correct first, then the highest speed-ups)."""
    best: dict[str, AttemptRecord] = {}
    for record in records:
        current = best.get(record.problem_id)
        if current is None or record.rank() > current.rank():
            best[record.problem_id] = record
    return best


def write_run_info(run_dir: Path, info: dict[str, Any]) -> None:
    (run_dir / RUN_FILE).write_text(json.dumps(info, indent=1, default=str), encoding="utf-8")


def read_run_info(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_FILE
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else {}
