"""How many compiler processes run at once in this process: one per CPU core by default.

A pool builds many candidates at once (``LocalPool``'s build threads), and each build runs its
translation units in parallel (nvcc's front ends included): unbounded, 16 builds of a few units
each put 50 compilers on 16 cores, and an 8 s build took up to 43 s. Every compiler step the
builder starts takes a slot here first and gives it back when the step ends, so the host runs
about as many compilers as it has cores and each build keeps its own pace. A step that cannot
get a slot before its build's deadline fails as a timeout (the candidate's build did not run).

``CUDA_AGENT_COMPILE_JOBS`` sets the number. What it does not do: limit compilers of other
processes (a worker's run-time build counts in that worker only).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

JOBS_ENV = "CUDA_AGENT_COMPILE_JOBS"

_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None
_waited_s = 0.0


def slot_count() -> int:
    value = os.environ.get(JOBS_ENV, "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return max(1, os.cpu_count() or 1)


def _semaphore() -> threading.BoundedSemaphore:
    global _slots
    with _lock:
        if _slots is None:
            _slots = threading.BoundedSemaphore(slot_count())
        return _slots


@contextlib.contextmanager
def compiler_slot(deadline: float) -> Iterator[bool]:
    """Hold a slot for one compiler step; yields False when none came before ``deadline``
    (the step must not run then)."""
    global _waited_s
    slots = _semaphore()
    started = time.monotonic()
    got = slots.acquire(timeout=max(0.0, deadline - started))
    with _lock:
        _waited_s += time.monotonic() - started
    try:
        yield got
    finally:
        if got:
            slots.release()


def seconds_waited() -> float:
    """Seconds this process's compiler steps have waited for a slot, in all."""
    with _lock:
        return _waited_s
