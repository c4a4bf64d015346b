"""Thread and child-process counts from /proc, and the names of the newest threads."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading

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


def test_child_processes_are_counted() -> None:
    before = child_process_count()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child_process_count() == before + 1
    finally:
        child.kill()
        child.wait()
