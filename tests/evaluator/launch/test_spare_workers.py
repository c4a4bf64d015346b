"""Spare evaluation workers: real processes, started ahead, each used once."""

import threading

import pytest

from cuda_agent.evaluator.launch.spare_workers import SpareWorkers
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.workspace.isolation import bwrap_usable


@pytest.mark.slow  # starts workers
def test_spares_are_kept_at_depth_and_never_reused(tmp_path) -> None:
    spares = SpareWorkers(tmp_path)
    env = worker_env()
    try:
        first = spares.take("cpu", env, depth=3)  # none ready yet: started on the spot
        assert spares.waiting("cpu", env) == 3
        assert spares.wait_ready(timeout_s=300)
        second = spares.take("cpu", env, depth=3)
        assert second.ready  # a warm one was chosen
        assert spares.waiting("cpu", env) == 3  # and the queue topped up again
        third = spares.take("cpu", env, depth=1)
        assert spares.waiting("cpu", env) == 2  # a smaller depth starts nothing new
        pids = {first.proc.pid, second.proc.pid, third.proc.pid}
        assert len(pids) == 3
        second.proc.kill()
        second.proc.wait()
    finally:
        spares.close()
    for handle in (first, third):
        handle.proc.kill()
        handle.proc.wait()
    assert spares.waiting("cpu", env) == 0


def test_only_the_most_recent_environments_keep_spares(tmp_path) -> None:
    """A long-lived process evaluating under many environments (tests, a service) must not
    pile up idle workers: the least recently used environment's spares are stopped."""
    spares = SpareWorkers(tmp_path, max_envs=2)
    envs = [worker_env({"CA_SPARE_TEST": str(k)}) for k in range(3)]
    taken = []
    try:
        for env in envs:
            taken.append(spares.take("cpu", env, depth=1))
        evicted_queue = spares.waiting("cpu", envs[0])
        assert evicted_queue == 0
        assert spares.waiting("cpu", envs[1]) == 1 and spares.waiting("cpu", envs[2]) == 1
    finally:
        spares.close()
        for handle in taken:
            handle.proc.kill()
            handle.proc.wait()


@pytest.mark.slow  # starts workers
def test_a_spare_outlives_the_thread_that_asked_for_it(tmp_path, monkeypatch) -> None:
    """bubblewrap's --die-with-parent fires when the *thread* that started the child ends:
    a service answers each request on its own thread, and the spare its request started
    must still be alive for the next one (CI saw it killed by SIGKILL during load)."""
    if not bwrap_usable():
        pytest.skip("bubblewrap is not usable here")
    monkeypatch.setenv("CUDA_AGENT_ISOLATION", "bwrap")
    spares = SpareWorkers(tmp_path)
    env = worker_env()
    taken = []
    try:
        asker = threading.Thread(
            target=lambda: taken.append(spares.take("cpu", env, sandboxed=True, depth=1))
        )
        asker.start()
        asker.join()  # the thread is gone: a death signal tied to it has been sent
        # the waiting spare's warm start (seconds) outlasts the signal's delivery by far
        assert spares.wait_ready(timeout_s=300), "the waiting spare died"
        assert taken[0].proc.poll() is None, f"the taken worker died: {taken[0].proc.returncode}"
        assert spares.waiting("cpu", env, sandboxed=True) == 1
    finally:
        spares.close()
        for handle in taken:
            handle.proc.kill()
            handle.proc.wait()
