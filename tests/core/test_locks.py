"""TurnLock: the device's readers-writer lock (shared work overlaps, timing is alone) and its
gate, which lets a waiting exclusive taker in before new shared ones."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from cuda_agent.core.locks import TurnLock, device_lock, ensure_lock_files, gate_path


def test_shared_holders_overlap_and_an_exclusive_one_waits_for_them(tmp_path: Path) -> None:
    path = ensure_lock_files(tmp_path / "cuda-0.lock")
    first, second, timer = TurnLock(path), TurnLock(path), TurnLock(path)
    try:
        assert first.take(exclusive=False) and second.take(exclusive=False, wait=False)
        assert not timer.take(exclusive=True, wait=False)  # verifications still running
        first.release()
        assert not timer.take(exclusive=True, wait=False)
        second.release()
        assert timer.take(exclusive=True, wait=False) and timer.mode == "exclusive"
        assert not first.take(exclusive=False, wait=False)  # nothing beside a timing
        timer.release()
        assert first.take(exclusive=False, wait=False)
    finally:
        for lock in (first, second, timer):
            lock.close()


def test_the_gate_keeps_new_shared_holders_out_while_a_timer_waits(tmp_path: Path) -> None:
    path = ensure_lock_files(tmp_path / "cuda-0.lock")
    waiting_timer = os.open(gate_path(path), os.O_RDONLY)  # what a waiting taker holds
    late = TurnLock(path)
    try:
        fcntl.flock(waiting_timer, fcntl.LOCK_EX)
        assert not late.take(exclusive=False, wait=False) and late.mode == ""
        fcntl.flock(waiting_timer, fcntl.LOCK_UN)
        assert late.take(exclusive=False, wait=False)
    finally:
        late.close()
        os.close(waiting_timer)


def test_a_lock_folder_without_gates_still_locks(tmp_path: Path) -> None:
    path = tmp_path / "cuda-0.lock"
    path.touch()  # made by an older version: no gate file
    holder, other = TurnLock(path), TurnLock(path)
    try:
        assert holder.take(exclusive=True) and not other.take(exclusive=False, wait=False)
    finally:
        holder.close()
        other.close()
    with device_lock(path):
        assert not TurnLock(path).take(exclusive=False, wait=False)
