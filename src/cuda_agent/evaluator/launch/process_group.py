"""Kill a worker's process group and wait until none of its members is still running.

``os.killpg`` only queues SIGKILL: a member that has not been scheduled since is still alive
(and still holds its files, its GPU memory, its command line) for a moment after the call
returns. A caller that promises "nothing the candidate left behind survives the evaluation"
must wait for that moment to pass. Members are found by their process-group id in
``/proc/*/stat``; a zombie counts as gone (it runs nothing and holds nothing but its pid).

Linux only (``/proc``); elsewhere the wait is skipped and only the signal is sent. It does not
find processes that left the group (``setsid``); a sandboxed worker's PID namespace covers those.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator

WAIT_S = 5.0
_POLL_S = 0.005


def process_stats() -> Iterator[tuple[int, list[bytes]]]:
    """(pid, the fields of ``/proc/PID/stat`` after the command name: state, ppid, pgrp, ...)
    of every process this host shows (none where ``/proc`` cannot be read)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # exited while we looked
        # fields after the command name (which may hold spaces and parentheses)
        yield int(name), stat[stat.rfind(b")") + 2 :].split()


def group_members(pgid: int) -> list[int]:
    """Pids of the running (not zombie) processes whose process group is ``pgid``."""
    return [
        pid
        for pid, fields in process_stats()
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid
    ]


def kill_group_and_wait(pgid: int, wait_s: float = WAIT_S) -> list[int]:
    """SIGKILL the group, then wait (up to ``wait_s``) until no member runs.

    Returns the members still running when the wait ran out (normally none).
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if not os.path.isdir("/proc/self"):
        return []
    deadline = time.monotonic() + wait_s
    while True:
        left = group_members(pgid)
        if not left or time.monotonic() >= deadline:
            return left
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)  # members forked since the first signal
        time.sleep(_POLL_S)
