"""Counts of this process's live threads and child processes, read from ``/proc/self``.

Used to notice work a candidate leaves running after a call returns (``evaluate``) and to
decide whether a worker may give up its device turn (``device_turn``). Torch-free on purpose:
``device_turn`` is imported by the build shim, which the parent process imports through the
pipeline, and the command line must start without importing torch. Linux only; elsewhere
each count is -1.
"""

from __future__ import annotations

import os


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


def newest_thread_names(count: int) -> str:
    """The names (``comm``) of this process's ``count`` newest threads, as ``name x N, ...``.

    Thread ids grow as threads start, so the highest ids are the newest: when threads were
    started during a call, these are they. Names tell a library's pool (cuDNN, OpenMP, inductor's
    compile workers) from a thread the candidate started. Empty when ``/proc`` cannot be read.
    """
    try:
        tids = sorted((int(t) for t in os.listdir("/proc/self/task")), reverse=True)[:count]
        names: dict[str, int] = {}
        for tid in tids:
            with open(f"/proc/self/task/{tid}/comm") as handle:
                name = handle.read().strip()
            names[name] = names.get(name, 0) + 1
    except (OSError, ValueError):
        return ""
    return ", ".join(f"{name} x {n}" for name, n in sorted(names.items(), key=lambda kv: -kv[1]))
