"""A worker's turn on a GPU it shares with other jobs: held for all device work, given up
only while the candidate's extension compiles at run time.

A pool that runs more than one job per GPU (``LocalPool(jobs_per_device=2)``, ``bench run
--jobs-per-gpu 2``) gives each evaluation worker the device's lock file
(``core/locks.device_lock_path``). The worker holds the lock from its first device operation
to its result, so no two workers ever use the GPU at once; but a run-time build (a
``load_inline`` in ``__init__``, 10-130 s of CPU) would keep the GPU idle meanwhile, so the
build shim gives the turn up for the compile and takes it back before the candidate continues.

The turn is given up only when nothing of the candidate can touch the GPU meanwhile: its
queued work has finished (the device is synchronised first), it runs no threads or child
processes beyond those alive when its code was first imported (``mark_baseline``), and no
hook would run its code on the builder's (a trace or profile function, a gc callback; the
cyclic collector is paused for the compile, so no finaliser runs either); otherwise the
worker keeps the turn and compiles holding it, as a pool with one job per GPU does. Not
covered: a signal handler with a timer the candidate armed. With no lock file (the default)
every method is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import sys
from collections.abc import Callable, Iterator

from cuda_agent.evaluator.worker.census import child_process_count, thread_count


class DeviceTurn:
    def __init__(self, lock_path: str = "") -> None:
        self.lock_path = lock_path
        self._fd: int | None = None
        self._threads = -1
        self._gc_callbacks = 0
        self.given_up = 0  # how many times the turn was given up for a compile

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> DeviceTurn:
        if self.lock_path:
            self._fd = os.open(self.lock_path, os.O_RDONLY)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
                os.close(self._fd)
            self._fd = None

    def mark_baseline(self) -> None:
        """Remember the harness's own threads and hooks, before any candidate code runs."""
        self._threads = thread_count()
        self._gc_callbacks = len(gc.callbacks)

    def _candidate_is_idle(self) -> bool:
        """No candidate code can run while the build does: no thread or child process of its
        own, and no hook that would run its code on ours (trace, profile, gc callback)."""
        threads = thread_count()
        return (
            self._threads > 0
            and 0 < threads <= self._threads
            and child_process_count() == 0
            and sys.gettrace() is None
            and sys.getprofile() is None
            and len(gc.callbacks) <= self._gc_callbacks
        )

    @contextlib.contextmanager
    def compiling(self, synchronize: Callable[[], None]) -> Iterator[bool]:
        """Give the turn up for the block if that is safe; yields whether it was."""
        if self._fd is None or not self._candidate_is_idle():
            yield False
            return
        synchronize()  # the candidate's queued kernels finish on our turn, not on another's
        collecting = gc.isenabled()
        gc.disable()  # no collection, so no candidate finaliser, runs off the turn
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        self.given_up += 1
        try:
            yield True
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            if collecting:
                gc.enable()


_CURRENT = DeviceTurn()


def current() -> DeviceTurn:
    """The turn of the request this worker is running (a no-op turn outside one)."""
    return _CURRENT


@contextlib.contextmanager
def holding(lock_path: str) -> Iterator[DeviceTurn]:
    """Hold the device's turn (``lock_path``; none: a no-op) while the request runs."""
    global _CURRENT
    with DeviceTurn(lock_path) as turn:
        _CURRENT = turn
        try:
            yield turn
        finally:
            _CURRENT = DeviceTurn()
