"""Thread and child-process counts from /proc, and the names of the newest threads.

The live counts are taken in a fresh interpreter: the test process itself runs other tests'
threads and workers (pytest-xdist, spare workers, their reader threads), which may start or end
while a count is taken.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cuda_agent.evaluator.worker.census import newest_thread_names

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

THREADS = """
import ctypes, threading
from cuda_agent.evaluator.worker.census import (
    newest_thread_names, settled_thread_count, thread_count,
)

PR_SET_NAME = 15

def sleeper(started, stop):
    ctypes.CDLL(None).prctl(PR_SET_NAME, b"ca-test-pool", 0, 0, 0)  # as a C library names it
    started.set()
    stop.wait(60)

before = thread_count()
stop = threading.Event()
threads = []
for _ in range(3):
    started = threading.Event()
    thread = threading.Thread(target=sleeper, args=(started, stop))
    thread.start()
    assert started.wait(60), "a thread never started"
    threads.append(thread)
during, names = thread_count(), newest_thread_names(3)
stop.set()
for thread in threads:
    thread.join()
print(before, during, settled_thread_count(before, grace_s=60), names, sep="|")
"""

CHILDREN = """
import subprocess, sys
from cuda_agent.evaluator.worker.census import child_process_count

before = child_process_count()
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                         stdin=subprocess.PIPE)
during = child_process_count()
child.stdin.close()
child.wait()
print(before, during, child_process_count(), sep="|")
"""


def _fresh(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().split("|")


def test_new_threads_are_counted_and_named() -> None:
    before, during, after, names = _fresh(THREADS)
    assert int(during) == int(before) + 3
    assert names == "ca-test-pool x 3"
    assert int(after) == int(before)  # joined threads leave /proc within the grace


JOINED = """
import threading
from cuda_agent.evaluator.worker.census import settled_thread_count, thread_count

before = thread_count()
for _ in range(200):  # a call that starts and joins its own threads, many times
    workers = [threading.Thread(target=sum, args=([1, 2],)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    after = settled_thread_count(before, grace_s=60)
    assert after == before, (before, after)
print("ok")
"""


def test_threads_joined_inside_a_call_are_not_counted_as_left_running() -> None:
    assert _fresh(JOINED) == ["ok"]


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
    before, during, after = (int(n) for n in _fresh(CHILDREN))
    assert during == before + 1
    assert after == before
