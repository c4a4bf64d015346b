"""Plain progress lines (a log, not a terminal): one per finished job, periodic summaries."""

from __future__ import annotations

import pytest

from cuda_agent.cli.progress_log import Reporter, Status
from cuda_agent.cluster.board import JobBoard, describe
from tests.helpers import wait_for


def test_plain_lines_and_summaries_say_what_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_PROGRESS", "plain")
    board = JobBoard()
    first, second, third = board.add("L1_1"), board.add("L1_2"), board.add("L1_3")
    board.move(first, "verify")
    board.move(second, "build")
    err: list[str] = []

    def summaries() -> list[str]:
        err.extend(capsys.readouterr().err.splitlines())
        return [line for line in err if line.startswith("[bench ")]

    with Reporter("bench", 3, board, interval_s=0.2) as reporter:
        assert wait_for(summaries), "no periodic summary"
        board.finish(first)
        reporter.finished("L1_1: correct (1.0 s)")
    lines = err + capsys.readouterr().err.splitlines()
    assert lines[0] == "bench: 3 jobs, 0 already done"
    assert any(
        line.endswith("L1_1: correct (1.0 s)") and line.startswith("[1/3 ") for line in lines
    )
    first_summary = next(line for line in lines if line.startswith("[bench "))
    assert "running 2 (build 1, verify 1) | queued 1" in first_summary
    assert "longest: L1_1 verify" in first_summary or "longest: L1_2 build" in first_summary
    assert lines[-1] == "bench: finished 1/3"
    board.finish(second)
    board.finish(third)
    assert describe(board.snapshot()) == "done 3 | running 0 | queued 0"


def test_a_long_step_says_it_is_still_running_in_a_log(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_PROGRESS", "plain")
    err: list[str] = []

    def heartbeats() -> list[str]:
        err.extend(capsys.readouterr().err.splitlines())
        return [line for line in err if "(still running," in line]

    with Status("eval", "evaluating x.py on relu (cpu)", interval_s=0.05) as status:
        status.update("build: compiling (relu, cpu)")
        assert wait_for(heartbeats), "no heartbeat line"
    lines = err + capsys.readouterr().err.splitlines()
    assert lines[0] == "eval: evaluating x.py on relu (cpu)"
    assert lines[1].startswith("[eval 0m") and lines[1].endswith("] build: compiling (relu, cpu)")
    beat = "build: compiling (relu, cpu) (still running, 0m00s)"
    assert any(line.endswith(beat) for line in lines)


def test_a_log_hears_from_a_long_run_at_least_every_15_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_PROGRESS_INTERVAL", raising=False)
    assert Reporter("bench", 1).interval_s <= 15
    assert Status("eval", "evaluating").interval_s <= 15
