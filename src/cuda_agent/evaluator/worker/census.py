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
