"""The memory cap of an evaluation worker and of a compiler process, and how a verdict names it.

The cap is an address-space limit (``RLIMIT_AS``) that the sandbox's launcher sets in the child
(``workspace/sandbox.py``, ``SandboxPolicy.address_space_bytes``). It applies on the ``cpu``
backend only: a CUDA process reserves far more virtual address space than it ever uses, so a
``cuda`` worker runs without it (its tensors are bounded by the GPU's memory instead).

Default: half of this host's ``MemTotal`` divided by the number of evaluations running at once
(``set_concurrent_workers``; pools call it), at least ``MIN_CAP_BYTES``.
``CUDA_AGENT_WORKER_MEMORY_GB`` overrides it (a number of GiB; ``0`` or ``off``: no cap).

Does not measure memory, nor kill anything: the kernel refuses the allocation, and the worker's
record or its death says so; ``cap_exceeded`` recognises that and ``cap_message`` words it.
"""

from __future__ import annotations

import os
from pathlib import Path

from cuda_agent.core.errors import ConfigError

MEMORY_CAP_ENV = "CUDA_AGENT_WORKER_MEMORY_GB"
HOST_SHARE = 0.5  # of MemTotal, split among the evaluations that run at once
MIN_CAP_BYTES = 2 << 30
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
    """The cap for one worker (or compiler) process on ``backend``; None: no cap."""
    if backend == "cuda":
        return None
    configured = os.environ.get(MEMORY_CAP_ENV, "").strip().lower()
    if configured:
        return _configured_cap(configured)
    total = host_memory_bytes()
    if total is None:
        return None
    return max(MIN_CAP_BYTES, int(total * HOST_SHARE) // _concurrent)


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


def cap_message(cap_bytes: int) -> str:
    """The verdict's words for a worker stopped by its cap."""
    return (
        f"worker exceeded its memory cap of {cap_text(cap_bytes)} "
        f"(set {MEMORY_CAP_ENV} to change it; the problem's size may be too large for this host)"
    )
