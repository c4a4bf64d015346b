"""A job cut off by the end of a run (killed, or stopped at a deadline) is queued last on resume.

The rule is a plain function; the slow test runs ``bench run`` for real on the cpu backend,
terminates it (SIGTERM, as ``timeout`` does) while one job holds the device, and resumes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cuda_agent.bench.records import STARTED_FILE, append_started, read_records, read_started
from cuda_agent.bench.run import requeued, resume_order
from tests.helpers import wait_for

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 32)]


def get_init_inputs():
    return []
"""

CORRECT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
"""

# holds the device until the run is stopped (sleeps, so that nothing spins if it outlived it)
STALLS = """
import time
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        time.sleep(300)
        return torch.relu(x)
"""


def test_jobs_started_before_go_last_fewest_starts_first() -> None:
    keys = [("a", 0), ("b", 0), ("c", 0), ("d", 0), ("a", 1)]
    starts: Counter[tuple[str, int]] = Counter({("a", 0): 2, ("c", 0): 1, ("a", 1): 1})
    assert resume_order(keys, starts) == [("b", 0), ("d", 0), ("c", 0), ("a", 1), ("a", 0)]
    assert requeued(resume_order(keys, starts), starts) == ["c", "a#1", "a"]
    assert resume_order(keys, Counter()) == keys  # a first run: problem order


def test_starts_are_read_back_per_attempt(tmp_path: Path) -> None:
    append_started(tmp_path, "a", 0, "GPU 0")
    append_started(tmp_path, "a", 0, "GPU 1")
    append_started(tmp_path, "b", 2, "episode")
    with open(tmp_path / STARTED_FILE, "a") as handle:
        handle.write('{"problem_id": "c", "att')  # torn by a crash
    assert read_started(tmp_path) == Counter({("a", 0): 2, ("b", 2): 1})


def _bench(problems: Path, solutions: Path, run: Path, log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "cuda_agent", "bench", "run", "--problems", str(problems)]
    argv += ["--solutions", str(solutions), "--backend", "cpu", "--baselines", ""]
    argv += ["--policy", "off", "--spare-workers", "1", "--out", str(run)]
    env = {**os.environ, "CUDA_AGENT_PROGRESS": "plain"}
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.mark.slow
def test_a_job_cut_off_by_the_end_of_a_run_is_resumed_last(tmp_path: Path) -> None:
    """And run.json keeps the figures of a run however it ended: the cut one's, then the
    resumed one's.

    The run is cut as soon as the stalled job holds the device. Which job takes the one device
    first is not fixed: each job's thread prepares, then waits for the device, and under load
    a later job can finish preparing first (once, ``c_quick`` took the device before
    ``b_stall``, so "the stall after exactly one verdict" never came and the test failed); and
    while the signal kills the workers, a waiting job can still take the freed device (its
    start recorded, no verdict: it was cut too). So the cut waits for the stall alone, and what
    the cut left is read back: the resumed run queues the jobs never started first and the cut
    ones last (``resume_order``). Three quick jobs: the stall overtaking all of them (nothing
    left to order) would take three such races at once."""
    problems, solutions, run = tmp_path / "problems", tmp_path / "solutions", tmp_path / "run"
    problems.mkdir()
    solutions.mkdir()
    names = ("a_quick", "b_stall", "c_quick", "d_quick")  # problem order
    quick = tuple(name for name in names if name != "b_stall")
    for name in names:
        (problems / f"{name}.py").write_text(PROBLEM)
        (solutions / f"{name}.py").write_text(STALLS if name == "b_stall" else CORRECT)
    log = tmp_path / "bench.log"

    def stalled() -> bool:
        done = {r.problem_id for r in read_records(run)}
        return ("b_stall", 0) in read_started(run) and "b_stall" not in done

    first = _bench(problems, solutions, run, log)
    try:
        assert wait_for(stalled, first), log.read_text()
        first.send_signal(signal.SIGTERM)  # as `timeout` stops a run at its deadline
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGTERM, log.read_text()[-3000:]
    done = {r.problem_id for r in read_records(run)}
    started = read_started(run)
    cut_off = [p for p in names if (p, 0) in started and p not in done]
    assert "b_stall" in cut_off  # started, no verdict
    assert done < set(quick)  # and at least one quick job left for the resumed run
    cut = json.loads((run / "run.json").read_text())
    assert cut["ended"] == "signal SIGTERM", cut
    assert cut["utilization"]["wall_s"] > 0
    # the workers' device work comes with verdicts (none when the stall took the device first)
    assert cut["utilization"]["device_work_s"] > 0 or not done, (done, cut)

    (solutions / "b_stall.py").write_text(CORRECT)  # so that the resumed run can finish
    second = _bench(problems, solutions, run, log)
    assert second.wait(timeout=900) == 0, log.read_text()[-3000:]
    info = json.loads((run / "run.json").read_text())
    assert info["requeued_last"] == cut_off, info  # the cut ones, after the others
    assert info["ended"] == "completed" and info["utilization"] != cut["utilization"]
    records = {r.problem_id: r for r in read_records(run)}
    assert set(records) == set(names)
    assert all(r.correct for r in records.values())
    assert read_started(run)[("b_stall", 0)] == 2  # once per run


def test_an_attempt_is_counted_before_it_is_written(tmp_path: Path) -> None:
    """``run.json``'s figures count an attempt before results.jsonl holds it (``bench.run._keep``):
    the other way round, a SIGTERM between the two left a record on disk and, when it was the
    run's first, no figures at all (the slow test above, once, under load). A problem with no
    solution gives its verdict without an evaluation."""
    from cuda_agent.bench.run import run_solutions
    from cuda_agent.cluster.local import LocalPool
    from cuda_agent.problems.sets import resolve_problem
    from tests.helpers import fast_options

    out, empty = tmp_path / "run", tmp_path / "solutions"
    empty.mkdir()
    on_disk_when_counted: list[int] = []

    def progress(record: object, finished: int, total: int) -> None:
        on_disk_when_counted.append(len(read_records(out)))

    with LocalPool("cpu") as pool:
        problems = [resolve_problem(pid, "small") for pid in ("relu", "row_sum")]
        records = run_solutions(problems, empty, pool, fast_options(), out, progress)
    assert on_disk_when_counted == [0, 1]  # each counted while not yet written
    assert [r.problem_id for r in read_records(out)] == [r.problem_id for r in records]
