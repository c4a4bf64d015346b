"""Counts of this process's live threads and child processes, read from ``/proc/self``.

Used to notice work a candidate leaves running after a call returns (``evaluate``) and to
decide whether a worker may give up its device turn (``device_turn``). Torch-free on purpose:
``device_turn`` is imported by the build shim, which the parent process imports through the
pipeline, and the command line must start without importing torch. Linux only; elsewhere
each count is -1.
"""

from __future__ import annotations

import os
import time


def child_process_count() -> int:
    """Live child processes of this process (``/proc/self/task/*/children``), or -1."""
    total = 0
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as handle:
                total += len(handle.read().split())
    except OSError:
        return -1
    return total


def thread_count() -> int:
    """Live threads of this process (``/proc/self/task``), or -1."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def settled_thread_count(limit: int, grace_s: float = 1.0) -> int:
    """The live thread count, given threads that are ending up to ``grace_s`` to leave.

    A thread whose Python function has returned (and that ``join`` has already reported as
    finished) still has an entry in ``/proc/self/task`` until the OS thread exits, a moment
    later: counted at once, a candidate that joined its own threads inside the call would look
    as if it left them running. Returns as soon as the count is ``<= limit``; only a count that
    stays higher costs the grace (and that is about to be a verdict).
    """
    deadline = time.monotonic() + grace_s
    count = thread_count()
    while count > limit and time.monotonic() < deadline:
        time.sleep(0.001)
        count = thread_count()
    return count


def newest_thread_names(count: int, task_dir: str = "/proc/self/task") -> str:
    """The names (``comm``) of this process's ``count`` newest threads, as ``name x N, ...``.

    Newest by start time (``stat`` field 22, in clock ticks), thread id breaking ties: thread
    ids do not tell age, because they come from the pid space, which wraps around in a long
    run that starts many processes (a CI run did, and named three old threads). When threads
    were started during a call, these are they, up to ties within one clock tick across a
    wrap. Names tell a library's pool (cuDNN, OpenMP, inductor's compile workers) from a
    thread the candidate started. Empty when ``task_dir`` cannot be read.
    """
    try:
        ages: list[tuple[int, int, str]] = []
        for entry in os.listdir(task_dir):
            with open(f"{task_dir}/{entry}/stat") as handle:
                stat = handle.read()
            with open(f"{task_dir}/{entry}/comm") as handle:
                name = handle.read().strip()
            # fields after the parenthesised name start at field 3 (state); starttime is 22
            started = int(stat[stat.rindex(")") + 2 :].split()[22 - 3])
            ages.append((started, int(entry), name))
    except (OSError, ValueError, IndexError):
        return ""
    names: dict[str, int] = {}
    for _, _, name in sorted(ages, reverse=True)[:count]:
        names[name] = names.get(name, 0) + 1
    return ", ".join(f"{name} x {n}" for name, n in sorted(names.items(), key=lambda kv: -kv[1]))
