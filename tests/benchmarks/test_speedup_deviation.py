"""benchmarks/speedup_deviation.py: one timing-fidelity line from either side's file (ours,
a ``bench run`` folder's results.jsonl; KernelBench's, the peer's self-speed-up JSON), run as the
recipe runs it; incorrect rows and rows without a speed-up are not counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "speedup_deviation.py"


def line_of(path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_both_sides_files_give_the_same_line(tmp_path: Path) -> None:
    ours = [
        {"correct": True, "speedup_eager": 1.02},
        {"correct": True, "speedup_eager": 0.90},
        {"correct": True, "speedup_eager": 0.99},
        {"correct": False, "speedup_eager": 5.0},
        {"correct": True, "speedup_eager": None},
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps({"result": r}) + "\n" for r in ours))
    peer = tmp_path / "kb_self.json"
    peer.write_text(
        json.dumps({"results": [{k.replace("_eager", ""): v for k, v in r.items()} for r in ours]})
    )
    expected = "problems 5 correct 3 median_abs_dev 0.0200 worst_abs_dev 0.1000"
    assert line_of(results) == expected
    assert line_of(peer) == expected


def test_no_correct_row_gives_dashes(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"result": {"correct": False}}) + "\n")
    assert line_of(results) == "problems 1 correct 0 median_abs_dev - worst_abs_dev -"
