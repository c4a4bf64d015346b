"""The memory cap of an evaluation worker and of a compiler process, and how a verdict names it.

On the ``cpu`` backend (and for every compiler process) the cap is an address-space limit
(``RLIMIT_AS``) that the sandbox's launcher sets in the child (``workspace/sandbox.py``,
``SandboxPolicy.address_space_bytes``): the kernel refuses the allocation past it, the worker's
record or its death says so, ``cap_exceeded`` recognises that and ``cap_message`` words it.
A CUDA process reserves far more virtual address space than it ever uses, so a ``cuda`` worker
gets its cap as a watch instead (``host_cap_bytes``; ``evaluator/launch/host_memory.py`` sums the
worker tree's anonymous resident memory and kills it past the cap), at least
``MIN_WATCHED_CAP_BYTES`` (a CUDA context and torch's libraries alone take about 2 GiB).

Default: half of this host's ``MemTotal`` divided by the number of evaluations running at once
(``set_concurrent_workers``; pools call it), at least ``MIN_CAP_BYTES``.
``CUDA_AGENT_WORKER_MEMORY_GB`` overrides both (a number of GiB; ``0`` or ``off``: no cap).

Does not measure memory, nor kill anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.core.errors import ConfigError

MEMORY_CAP_ENV = "CUDA_AGENT_WORKER_MEMORY_GB"
HOST_SHARE = 0.5  # of MemTotal, split among the evaluations that run at once
MIN_CAP_BYTES = 2 << 30
MIN_WATCHED_CAP_BYTES = 8 << 30
GIB = 1 << 30
FLAG = "memory_cap"
# what an allocation refused by RLIMIT_AS looks like in a worker's error or stderr
REFUSED_ALLOCATION = (
    "MemoryError",
    "can't allocate memory",
    "Cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
)

_concurrent = 1


def set_concurrent_workers(count: int) -> None:
    """How many evaluations this process runs at once (the default cap is split among them)."""
    global _concurrent
    _concurrent = max(1, int(count))


def host_memory_bytes() -> int | None:
    """``MemTotal`` of this host (None where /proc/meminfo cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def worker_memory_cap_bytes(backend: str = "cpu") -> int | None:
    """The address-space cap for one worker (or compiler) process on ``backend``; None: no
    cap (always on ``cuda``: see ``host_cap_bytes``)."""
    if backend == "cuda":
        return None
    return _cap_bytes(MIN_CAP_BYTES)


def host_cap_bytes(backend: str) -> int | None:
    """The host-memory cap that a ``cuda`` worker's watch enforces; None: none (on ``cpu``,
    ``RLIMIT_AS`` caps the worker instead)."""
    if backend != "cuda":
        return None
    return _cap_bytes(MIN_WATCHED_CAP_BYTES)


def _cap_bytes(minimum: int) -> int | None:
    configured = os.environ.get(MEMORY_CAP_ENV, "").strip().lower()
    if configured:
        return _configured_cap(configured)
    total = host_memory_bytes()
    if total is None:
        return None
    return max(minimum, int(total * HOST_SHARE) // _concurrent)


def _configured_cap(value: str) -> int | None:
    if value in ("0", "off", "none"):
        return None
    try:
        gib = float(value)
    except ValueError:
        gib = -1.0
    if not 0 < gib < float("inf"):
        raise ConfigError(f"{MEMORY_CAP_ENV}={value!r}: give a number of GiB > 0, or off")
    return int(gib * GIB)


def cap_text(cap_bytes: int) -> str:
    """``12 GiB`` / ``1.5 GiB``."""
    return f"{cap_bytes / GIB:.3g} GiB"


def cap_exceeded(text: str) -> bool:
    """Whether ``text`` (an error or a stderr tail) reports an allocation that was refused."""
    return any(marker in text for marker in REFUSED_ALLOCATION)


def watched_cap_message(cap_bytes: int, peak_bytes: int) -> str:
    """The verdict's words for a cuda worker the watch stopped."""
    return (
        f"worker's host memory reached {cap_text(peak_bytes)}, past its memory cap of "
        f"{cap_text(cap_bytes)}, and it was stopped (set {MEMORY_CAP_ENV} to change the cap; "
        "the problem's size may be too large for this host)"
    )


def cap_message(cap_bytes: int) -> str:
    """The verdict's words for a worker stopped by its cap."""
    return (
        f"worker exceeded its memory cap of {cap_text(cap_bytes)} "
        f"(set {MEMORY_CAP_ENV} to change it; the problem's size may be too large for this host)"
    )
