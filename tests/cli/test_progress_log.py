"""Plain progress lines (a log, not a terminal): one per finished job, periodic summaries."""

from __future__ import annotations

import time

import pytest

from cuda_agent.cli.progress_log import Reporter
from cuda_agent.cluster.board import JobBoard, describe


def test_plain_lines_and_summaries_say_what_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_PROGRESS", "plain")
    board = JobBoard()
    first, second, third = board.add("L1_1"), board.add("L1_2"), board.add("L1_3")
    board.move(first, "verify")
    board.move(second, "build")
    with Reporter("bench", 3, board, interval_s=0.2) as reporter:
        time.sleep(0.5)
        board.finish(first)
        reporter.finished("L1_1: correct (1.0 s)")
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "bench: 3 jobs, 0 already done"
    assert any(
        line.endswith("L1_1: correct (1.0 s)") and line.startswith("[1/3 ") for line in lines
    )
    summaries = [line for line in lines if line.startswith("[bench ")]
    assert summaries, lines
    assert "running 2 (build 1, verify 1) | queued 1" in summaries[0]
    assert "longest: L1_1 verify" in summaries[0] or "longest: L1_2 build" in summaries[0]
    assert lines[-1] == "bench: finished 1/3"
    board.finish(second)
    board.finish(third)
    assert describe(board.snapshot()) == "done 3 | running 0 | queued 0"
