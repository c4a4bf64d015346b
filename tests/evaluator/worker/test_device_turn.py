"""DeviceTurn: a worker's turn on a shared device, given up only for a safe compile.

Whether a turn may be given up depends on this process's threads and child processes, so the
tests that give it up run in a fresh process (``in_fresh_process``): the test process runs
other tests' threads and long-lived children.
"""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from cuda_agent.evaluator.worker.device_turn import DeviceTurn, current, holding
from tests.helpers import in_fresh_process, lock_free


@pytest.fixture
def lock_file(tmp_path: Path) -> Path:
    path = tmp_path / "cuda-0.lock"
    path.touch()
    return path


@in_fresh_process
def test_held_for_the_request_and_given_up_only_while_compiling(lock_file: Path) -> None:
    synced: list[bool] = []
    with holding(str(lock_file)) as turn:
        assert current() is turn and turn.held and not lock_free(lock_file)
        turn.mark_baseline()
        with turn.compiling(lambda: synced.append(True)) as given_up:
            assert given_up and lock_free(lock_file)
        assert synced == [True]  # the device was synchronised before it was left
        assert not lock_free(lock_file) and turn.given_up == 1
    assert lock_free(lock_file) and not current().held


@in_fresh_process
def test_kept_while_the_candidate_runs_a_thread(lock_file: Path) -> None:
    stop = threading.Event()
    with holding(str(lock_file)) as turn:
        turn.mark_baseline()
        thread = threading.Thread(target=stop.wait, daemon=True)  # the candidate's own
        thread.start()
        try:
            with turn.compiling(lambda: None) as given_up:
                assert not given_up and not lock_free(lock_file)
        finally:
            stop.set()
            thread.join(timeout=5)
        assert turn.given_up == 0


@in_fresh_process
def test_kept_while_a_hook_could_run_candidate_code(lock_file: Path) -> None:
    def hook(phase: str, info: dict[str, object]) -> None:
        pass

    with holding(str(lock_file)) as turn:
        turn.mark_baseline()
        gc.callbacks.append(hook)
        try:
            with turn.compiling(lambda: None) as given_up:
                assert not given_up and not lock_free(lock_file)
        finally:
            gc.callbacks.remove(hook)
        with turn.compiling(lambda: None) as given_up:
            assert given_up and not gc.isenabled()  # no finaliser runs off the turn
        assert gc.isenabled()


def test_never_given_up_before_the_baseline_is_known(lock_file: Path) -> None:
    with DeviceTurn(str(lock_file)) as turn, turn.compiling(lambda: None) as given_up:
        assert not given_up and not lock_free(lock_file)


def test_without_a_lock_file_everything_is_a_no_op() -> None:
    with holding("") as turn:
        turn.mark_baseline()
        with turn.compiling(lambda: pytest.fail("no device to synchronise")) as given_up:
            assert not given_up
    assert turn.given_up == 0


def test_shared_until_it_measures_then_alone_to_the_end(lock_file: Path) -> None:
    synced: list[bool] = []
    with holding(str(lock_file)) as turn:
        assert turn.mode == "shared"
        assert lock_free(lock_file, shared=True) and not lock_free(
            lock_file
        )  # others verify beside it
        turn.exclusive(lambda: synced.append(True))
        assert synced == [True]
        assert turn.mode == "exclusive" and not lock_free(lock_file, shared=True)
        turn.exclusive(lambda: pytest.fail("already alone: nothing to do"))
        assert turn.mode == "exclusive"
    assert lock_free(lock_file)


@in_fresh_process
def test_a_compile_off_turn_takes_the_turn_back_in_the_mode_it_held(lock_file: Path) -> None:
    with holding(str(lock_file)) as turn:
        turn.mark_baseline()
        turn.exclusive(lambda: None)
        with turn.compiling(lambda: None) as given_up:
            assert given_up and lock_free(lock_file)
        assert turn.mode == "exclusive" and not lock_free(lock_file, shared=True)


@in_fresh_process
def test_a_candidate_that_could_still_run_keeps_the_shared_turn(lock_file: Path) -> None:
    def hook(phase: str, info: dict[str, object]) -> None:
        pass

    with holding(str(lock_file)) as turn:
        turn.mark_baseline()
        gc.callbacks.append(hook)  # candidate code that could run at any moment
        try:
            assert not turn.exclusive(lambda: pytest.fail("the turn is not let go"))
            assert turn.mode == "shared" and not lock_free(lock_file)
        finally:
            gc.callbacks.remove(hook)
        assert turn.exclusive(lambda: None) and turn.mode == "exclusive"


def test_a_wait_for_the_turn_is_announced_and_one_taken_at_once_is_not(lock_file: Path) -> None:
    from cuda_agent.core.locks import TurnLock

    heard: list[str] = []
    waiting = threading.Event()

    def on_wait(state: str) -> None:
        heard.append(state)
        if state == "waiting":
            waiting.set()

    other_job = TurnLock(lock_file)
    other_job.take(exclusive=False)
    with holding(str(lock_file), on_wait) as turn:  # shared beside shared: at once
        assert turn.mode == "shared" and heard == []
        alone = threading.Thread(target=turn.exclusive, args=(lambda: None,))
        alone.start()
        assert waiting.wait(timeout=60), "the wait for the device alone was not announced"
        assert heard == ["waiting"] and alone.is_alive()
        other_job.close()  # the other job's work is done
        alone.join(timeout=60)
        assert heard == ["waiting", "held"] and turn.mode == "exclusive"
        assert turn.waited_s > 0
