"""A worker's turn on a GPU it shares with other jobs: shared for device work that measures
nothing, exclusive for what measures time, given up while the candidate's extension compiles.

A pool that runs more than one job per GPU (``LocalPool(jobs_per_device=2)``, ``bench run
--jobs-per-gpu 2``) gives each worker the device's lock file (``core/locks.device_lock_path``),
a readers-writer lock (``core/locks.TurnLock``). A worker takes it **shared** from its first
device operation: building the reference and its inputs, importing and constructing the
candidate, the verification trials and the memory check overlap other jobs' shared work on the
GPU (they measure nothing, and their verdicts do not depend on the device being alone). Before
the first step that measures time (the kernel record, the timing rounds, the stream check, the
profile; a torch.compile baseline's timing) it takes the lock **exclusively**
(``DeviceTurn.exclusive``) and keeps it to its result, so no other job's device work runs while
it times. A run-time build (a ``load_inline`` in ``__init__``, 10-130 s of CPU) would keep the
GPU idle meanwhile, so the build shim gives the turn up for the compile and takes it back (in
the mode it held) before the candidate continues.

The turn is given up only when nothing of the candidate can touch the GPU meanwhile: its
queued work has finished (the device is synchronised first), it runs no threads or child
processes beyond those alive when its code was first imported (``mark_baseline``), and no
hook would run its code on the builder's (a trace or profile function, a gc callback; the
cyclic collector is paused for the compile, so no finaliser runs either); otherwise the
worker keeps the turn and compiles holding it, as a pool with one job per GPU does. Not
covered: a signal handler with a timer the candidate armed. With no lock file (the default,
one job per GPU) every method is a no-op.

Taking the exclusive turn lets the shared one go first (``flock`` converts no lock in place),
after synchronising the device, and only under the condition a compile's give-up has: nothing
of the candidate can run meanwhile; otherwise the job keeps its shared turn and measures beside
the others (noted ``timed_beside_other_jobs``), so a candidate cannot run GPU work into another
job's timed calls.

A job whose reference and inputs already hold more than 1/16 of the GPU's memory takes the
device alone at once (``alone_if_large``), so jobs side by side never run it out of memory
between them: a verdict does not depend on its neighbours.

``waited_s`` counts the seconds spent waiting for the lock (reported with the worker's phases).
A wait that does not end at once is announced to the parent (``on_wait``: a ``turn`` line,
``waiting`` before it and ``held`` after), whose device budget stops its clock meanwhile
(``worker_process.Deadline``): the budget measures the candidate's own time on the device, so
a job is never stopped for waiting behind another, and the budget need not grow with the
number of jobs on the device (with it grown, one candidate whose kernel never ends held every
job on its GPU for jobs x the budget).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator

from cuda_agent.core.locks import TurnLock
from cuda_agent.evaluator.worker.census import child_process_count, thread_count

# a job whose reference and inputs hold more than this share of the GPU's memory works alone
LARGE_FRACTION = 1 / 16


class DeviceTurn:
    def __init__(self, lock_path: str = "", on_wait: Callable[[str], None] | None = None) -> None:
        self.lock_path = lock_path
        self.on_wait = on_wait  # told "waiting" before a wait for the lock, "held" after it
        self._lock: TurnLock | None = None
        self._threads = -1
        self._gc_callbacks = 0
        self.given_up = 0  # how many times the turn was given up for a compile
        self.waited_s = 0.0  # seconds spent waiting for the lock

    @property
    def held(self) -> bool:
        return self._lock is not None

    @property
    def mode(self) -> str:
        """``shared``, ``exclusive``, or ``""`` with no lock file."""
        return self._lock.mode if self._lock is not None else ""

    def __enter__(self) -> DeviceTurn:
        if self.lock_path:
            self._lock = TurnLock(self.lock_path)
            self._take(exclusive=False)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _take(self, exclusive: bool) -> None:
        assert self._lock is not None
        if self._lock.take(exclusive, wait=False):
            return
        if self.on_wait is not None:
            self.on_wait("waiting")
        began = time.perf_counter()
        self._lock.take(exclusive)
        self.waited_s += time.perf_counter() - began
        if self.on_wait is not None:
            self.on_wait("held")

    def alone_if_large(self, synchronize: Callable[[], None]) -> bool:
        """Take the device alone now if what this process holds on the GPU (the reference, its
        inputs) exceeds ``LARGE_FRACTION`` of the device's memory: several such jobs side by
        side could run the device out of memory, and a job's verdict must not depend on its
        neighbours. Returns whether it did (a no-op without a lock file or off the GPU)."""
        if self._lock is None or self.mode == "exclusive":
            return False
        import torch

        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return False
        used = torch.cuda.max_memory_allocated()
        if used <= LARGE_FRACTION * torch.cuda.get_device_properties(0).total_memory:
            return False
        self.exclusive(synchronize)
        return True

    def exclusive(self, synchronize: Callable[[], None]) -> bool:
        """Hold the device alone from now to the end of the request (before any step that
        measures time); a no-op without a lock file or when already alone. The device is
        synchronised first: the work this process queued under the shared turn finishes
        before the lock is let go for the exchange, not during another job's timing.

        Where candidate code has run (``mark_baseline`` was called) and something of it could
        still run (``_candidate_is_idle``: a thread, a child process, a hook), the shared
        turn is kept instead, and the job measures beside other jobs' shared work: its own
        figures may be disturbed, no other job's can be. Returns whether the device is alone.
        """
        if self._lock is None or self._lock.mode == "exclusive":
            return self._lock is not None
        if self._threads > 0 and not self._candidate_is_idle():
            return False
        synchronize()
        self._take(exclusive=True)
        return True

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
        if self._lock is None or not self._candidate_is_idle():
            yield False
            return
        synchronize()  # the candidate's queued kernels finish on our turn, not on another's
        collecting = gc.isenabled()
        gc.disable()  # no collection, so no candidate finaliser, runs off the turn
        exclusive = self.mode == "exclusive"
        assert self._lock is not None
        self._lock.release()
        self.given_up += 1
        try:
            yield True
        finally:
            self._take(exclusive)
            if collecting:
                gc.enable()


_CURRENT = DeviceTurn()


def current() -> DeviceTurn:
    """The turn of the request this worker is running (a no-op turn outside one)."""
    return _CURRENT


@contextlib.contextmanager
def holding(lock_path: str, on_wait: Callable[[str], None] | None = None) -> Iterator[DeviceTurn]:
    """Hold the device's turn (``lock_path``; none: a no-op) while the request runs;
    ``on_wait`` hears of every wait for it that does not end at once."""
    global _CURRENT
    with DeviceTurn(lock_path, on_wait) as turn:
        _CURRENT = turn
        try:
            yield turn
        finally:
            _CURRENT = DeviceTurn()
