"""``benchmarks/verdict_rate.py`` over two run folders: verdicts, correct ones, verdicts per
hour, and whether the pair gave the same verdict on each solution both judged (it reads the
folders through ``bench_pair.load``). What it does not check: the GPU's busy fraction (a file
of NVML samples) or the phase figures (``cluster.ledger.utilization``'s own tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.verdict_rate import main

from cuda_agent.bench.records import AttemptRecord, append_record
from tests.helpers import verdict


def _run(folder: Path, verdicts: dict[str, bool]) -> str:
    folder.mkdir()
    for pid, ok in verdicts.items():
        error = None if ok else {"stage": "verify", "message": "outputs differ"}
        result = verdict(pid, correct=ok, error=error)
        append_record(folder, AttemptRecord(pid, 1, 0, "solutions", result))
    return str(folder)


def test_two_runs_are_counted_and_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _run(tmp_path / "a", {"p1": True, "p2": False, "p3": True})
    second = _run(tmp_path / "b", {"p1": True, "p2": True})
    assert main([f"{first}:1800", f"{second}:3600"]) == 0
    out = capsys.readouterr().out
    figures = json.loads(out.strip().splitlines()[-1])
    a, b = figures["runs"]
    assert (a["verdicts"], a["correct"], a["per_hour"]) == (3, 2, 6)
    assert (b["verdicts"], b["correct"], b["per_hour"]) == (2, 2, 2)
    assert "same verdict on 1 of 2 judged by both" in out
