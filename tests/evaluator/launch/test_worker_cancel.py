"""``run_worker(..., cancel=event)`` on a real evaluate worker (cpu backend): once another thread
sets the event, the worker, busy in the candidate's forward, is killed and the outcome says
``cancelled``; nothing of it is left running.

The candidate holds an exclusive ``flock`` on a file in its own folder from its import on; a
lock dies with every process holding it, so the lock being free again after the call (and
held before the event was set) shows that the worker is gone, whatever pid namespace the
sandbox gave it (under bubblewrap a moment after the call returns: the test waits for it).

What it does not check: the follow-ups that use the event (``follow_ups.py``, through the
pipeline's tests).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from cuda_agent.evaluator.launch.worker_process import WorkerOutcome
from tests.helpers import lock_free, run_relu_worker, wait_for

LOCK_NAME = "alive.lock"
BUSY_CANDIDATE = f'''
import fcntl
from pathlib import Path

import torch.nn as nn

_lock = open(Path(__file__).parent / "{LOCK_NAME}", "w")
fcntl.flock(_lock, fcntl.LOCK_EX)  # held for as long as this process lives


class ModelNew(nn.Module):
    def forward(self, x):
        while True:  # busy for good: only a kill ends it
            pass
'''


def run_busy_worker(
    tmp_path: Path, cancel: threading.Event, on_stage: threading.Event
) -> tuple[WorkerOutcome, Path]:
    """The busy candidate in an evaluate worker; ``on_stage`` is set at its ``verify`` line."""

    def on_event(event: dict[str, object]) -> None:
        if event.get("type") == "stage" and event.get("stage") == "verify":
            on_stage.set()

    outcome = run_relu_worker(tmp_path, BUSY_CANDIDATE, on_event=on_event, cancel=cancel)
    return outcome, tmp_path / "worker" / "solution" / LOCK_NAME


@pytest.mark.slow  # starts a worker
def test_a_cancelled_worker_is_killed_and_gone(tmp_path: Path) -> None:
    cancel = threading.Event()
    verifying = threading.Event()  # the worker's verify line (or the call's end)
    finished = threading.Event()
    seen: dict[str, bool] = {}
    lock = tmp_path / "worker" / "solution" / LOCK_NAME

    def canceller() -> None:
        """Set the event once the worker is in the candidate's endless forward."""
        verifying.wait()
        held = wait_for(lambda: finished.is_set() or (lock.exists() and not lock_free(lock)))
        seen["held"] = bool(held) and not finished.is_set()
        cancel.set()

    thread = threading.Thread(target=canceller, daemon=True)
    thread.start()
    try:
        outcome, lock_path = run_busy_worker(tmp_path, cancel, verifying)
    finally:
        finished.set()
        verifying.set()
        thread.join()

    assert lock_path == lock
    assert seen == {"held": True}, "the worker never reached the candidate's forward"
    assert outcome.cancelled is True
    assert outcome.record is None and not outcome.timed_out and not outcome.over_budget
    assert outcome.last_stage == "verify"
    assert outcome.returncode is not None  # reaped
    assert "killed" in outcome.death_reason(), outcome.death_reason()
    # under bubblewrap the candidate runs in a session of its own inside a pid namespace, and
    # dies (bwrap's --die-with-parent) a moment after the group run_worker kills and reaps:
    # the lock is free once it is gone (CI saw it still held right at the return)
    released = wait_for(lambda: lock_free(lock))
    assert released, "a process of the worker still holds the candidate's lock"


@pytest.mark.slow  # starts a worker
def test_an_event_set_before_the_call_ends_it_at_once(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    outcome, _ = run_busy_worker(tmp_path, cancel, threading.Event())
    assert outcome.cancelled is True
    assert outcome.record is None and not outcome.timed_out
    assert outcome.last_stage == ""  # no line was read
    assert outcome.returncode is not None
