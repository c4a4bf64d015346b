"""The job board names the job holding each device and its phase; a real LocalPool fills it."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.cluster.board import JobBoard, describe
from cuda_agent.cluster.local import LocalPool
from cuda_agent.cluster.pool import EvalJob
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options, relu_solution


def test_the_line_names_each_devices_job_and_phase() -> None:
    board = JobBoard()
    first, second, third = board.add("L1_5_x"), board.add("L1_9_y"), board.add("L2_1_z")
    board.assign(first, "GPU 0")
    board.move(first, "verify")
    board.move(second, "build")
    snapshot = board.snapshot()
    since = snapshot.devices["GPU 0"][0].since
    line = describe(snapshot, now=since + 41)
    assert "| GPU 0: L1_5_x verify 41 s |" in line, line
    assert "longest: L1_9_y build" in line and "longest: L1_5_x" not in line  # listed once
    assert "L2_1_z" not in line  # queued: counted, not named

    board.assign(first, "")  # gave its device back
    board.assign(third, "GPU 1")
    board.move(third, "time")
    line = describe(board.snapshot())
    assert "| GPU 0: idle |" in line and "| GPU 1: L2_1_z time " in line, line


def test_a_local_pool_reports_the_device_its_job_holds(tmp_path: Path) -> None:
    """A real evaluation through a LocalPool: when it takes its device, its ``on_start`` gets
    the device's name and the board's line names the job on that device."""
    problem = resolve_problem("relu", "small")
    solution = load_solution(relu_solution(tmp_path, "return ops.relu_ok(x)"))
    starts: list[tuple[str, str]] = []
    with LocalPool("cpu") as pool:

        def on_start(device: str) -> None:
            starts.append((device, describe(pool.board.snapshot())))

        result = pool.submit(EvalJob(problem, solution, fast_options(), on_start=on_start)).result()
        after = describe(pool.board.snapshot())
    assert result.correct, (result.error, result.flags)
    assert [device for device, _ in starts] == ["cpu0"]
    assert f"| cpu0: {problem.id} start 0 s" in starts[0][1], starts
    assert "| cpu0: idle" in after, after  # given back before the job's result was set
