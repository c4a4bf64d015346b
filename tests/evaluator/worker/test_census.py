"""Thread and child-process counts from /proc, and the names of the newest threads."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cuda_agent.evaluator.worker.census import (
    child_process_count,
    newest_thread_names,
    thread_count,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
PR_SET_NAME = 15


def _named_sleeper(name: bytes, started: threading.Event, stop: threading.Event) -> None:
    ctypes.CDLL(None).prctl(PR_SET_NAME, name, 0, 0, 0)  # the OS-level name, as a C library sets it
    started.set()
    stop.wait(30)


def test_new_threads_are_counted_and_named() -> None:
    before = thread_count()
    stop = threading.Event()
    threads = []
    for _ in range(3):
        started = threading.Event()
        thread = threading.Thread(target=_named_sleeper, args=(b"ca-test-pool", started, stop))
        thread.start()
        started.wait(10)
        threads.append(thread)
    try:
        assert thread_count() == before + 3
        assert newest_thread_names(3) == "ca-test-pool x 3"
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert thread_count() == before


def _fake_task(task_dir: Path, tid: int, name: str, started: int) -> None:
    folder = task_dir / str(tid)
    folder.mkdir()
    (folder / "comm").write_text(name + "\n")
    # fields 3..21, then starttime (field 22), then one more
    fields = ["S", "1", "1", "1", "0", "-1", "0"] + ["0"] * 12 + [str(started), "0"]
    (folder / "stat").write_text(f"{tid} ({name}) " + " ".join(fields) + "\n")


def test_newest_means_latest_started_even_when_thread_ids_wrapped(tmp_path: Path) -> None:
    # old threads hold high ids; the pid space wrapped, so the newest ones got low ids
    _fake_task(tmp_path, 4_000_001, "python3", 100)
    _fake_task(tmp_path, 4_000_007, "grpc_global_tim", 150)
    _fake_task(tmp_path, 4_000_009, "worker.io", 160)
    for tid in (301, 302, 305):
        _fake_task(tmp_path, tid, "ca-test-pool", 9_000 + tid)
    assert newest_thread_names(3, str(tmp_path)) == "ca-test-pool x 3"
    assert newest_thread_names(4, str(tmp_path)) == "ca-test-pool x 3, worker.io x 1"


def test_a_name_with_spaces_and_parentheses_does_not_shift_the_fields(tmp_path: Path) -> None:
    _fake_task(tmp_path, 10, "a (b) c", 500)
    _fake_task(tmp_path, 11, "old", 400)
    assert newest_thread_names(1, str(tmp_path)) == "a (b) c x 1"


def test_child_processes_are_counted() -> None:
    before = child_process_count()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child_process_count() == before + 1
    finally:
        child.kill()
        child.wait()
