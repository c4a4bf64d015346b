"""RayPool's fault path on a local Ray (cpu backend): an actor killed in the middle of a job
(as a crash would, by signal, or by ``ray.kill``) is replaced, the job runs again on the new
actor without building again and its result comes back, and the evaluation process the dead
actor left behind does not outlive it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.cluster.pool import EvalJob
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray")

# While the file HANG exists, the first forward call says so (HUNG, with its process id) and
# hangs: the job is then surely in the middle of its evaluation, and an orphaned worker would
# live on for minutes.
HANGING_RELU = """
import os
import time
import torch
import torch.nn as nn

HANG, HUNG = {hang!r}, {hung!r}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if os.path.exists(HANG):
            with open(HUNG + ".tmp", "w") as note:
                note.write(str(os.getpid()))
            os.rename(HUNG + ".tmp", HUNG)
            time.sleep(300)
        return torch.relu(x)
"""


@pytest.fixture(scope="module")
def pool() -> Iterator:
    from cuda_agent.cluster.ray_pool import RayPool

    pool = RayPool("cpu", workers=1, local_cpus=2)
    try:
        yield pool
    finally:
        pool.close()
        ray.shutdown()


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_when_hung(pool, how: str, hang: Path, hung: Path, victims: list[int]) -> threading.Thread:
    """Once the candidate hangs inside its evaluation, kill the busy actor ``how``."""

    def run() -> None:
        deadline = time.monotonic() + 300
        while not hung.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        index = pool.busy_actors()[0]
        pid = pool.actor_where(index)["pid"]
        victims.append(int(hung.read_text()))  # the hung evaluation process
        if how == "signal":
            os.kill(pid, signal.SIGKILL)
        else:
            pool.kill_actor(index)
        hang.unlink()  # the retry evaluates normally

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("how", ["signal", "ray"])
def test_a_killed_actor_is_replaced_and_the_job_retried(pool, how: str, tmp_path: Path) -> None:
    problem = resolve_problem("relu", "small")
    hang, hung = tmp_path / "hang", tmp_path / "hung"
    hang.touch()
    (tmp_path / "hanging_relu.py").write_text(HANGING_RELU.format(hang=str(hang), hung=str(hung)))
    solution = load_solution(tmp_path / "hanging_relu.py")
    # no sandbox: its bubblewrap, where usable, dies with its parent; the watcher is the
    # pool's own guard
    options = fast_options(policy="off", keep_spare_worker=False, sandbox=False)
    restarts = pool.actor_restarts
    first_pid = pool.actor_where(0)["pid"]
    victims: list[int] = []
    killer = kill_when_hung(pool, how, hang, hung, victims)
    result = pool.submit(EvalJob(problem, solution, options)).result(timeout=600)
    killer.join(timeout=5)
    assert len(victims) == 1 and victims[0] != first_pid, victims
    assert result.correct, result.error
    assert result.details.pool_attempts == 2
    assert pool.actor_restarts == restarts + 1
    assert pool.actor_failures[-1] == "relu"
    assert pool.actor_where(0)["pid"] != first_pid
    deadline = time.monotonic() + 300  # the dead actor's watcher kills it at once
    while any(alive(p) for p in victims) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in victims), "the dead actor's evaluation process lives on"
    again = pool.submit(EvalJob(problem, solution, options)).result(timeout=600)
    assert again.correct and again.details.pool_attempts == 1


def test_actors_that_cannot_start_are_a_clear_error(pool) -> None:
    """Two more one-CPU actors on a two-CPU Ray that already holds one: the pool says so."""
    from cuda_agent.cluster.ray_pool import RayPool

    with pytest.raises(RuntimeError, match="did not start 2 device actor"):
        RayPool("cpu", workers=2, start_timeout_s=10)
    job_options = fast_options(policy="off")
    problem = resolve_problem("relu", "small")
    solution = load_solution(examples_root() / "relu" / "cpu.py")
    result = pool.submit(EvalJob(problem, solution, job_options)).result(timeout=600)
    assert result.correct  # the failed pool's actors are gone: the CPU is free again
