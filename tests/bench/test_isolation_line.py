"""`bench report` says first how the run's candidates were isolated (unsandboxed loudest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_agent.bench.records import AttemptRecord, append_record, isolation_summary
from tests.helpers import verdict


def _record(pid: str, isolation: str | None) -> AttemptRecord:
    details = {"isolation": isolation} if isolation else {}
    result = {"correct": True, "speedup_eager": 1.0, "details": details}
    return AttemptRecord(pid, 1, 0, "solutions", verdict(pid, **result))


def test_summary_names_unsandboxed_runs_first() -> None:
    records = [_record("a", "bwrap"), _record("b", "none"), _record("c", "bwrap")]
    assert isolation_summary(records) == (
        "NONE: 1 of 3 ran unsandboxed (--allow-unsandboxed); bwrap (2)"
    )
    assert isolation_summary([_record("a", "user+landlock+netns")]) == "user+landlock+netns (1)"
    assert isolation_summary([_record("a", None)]) == "not recorded (1)"


def test_report_prints_it_on_the_first_line(tmp_path: Path) -> None:
    for pid, isolation in (("L1_1", "none"), ("L1_2", "landlock+netns")):
        append_record(tmp_path, _record(pid, isolation))
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "bench", "report", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert (
        first == "isolation: NONE: 1 of 2 ran unsandboxed (--allow-unsandboxed); landlock+netns (1)"
    )
