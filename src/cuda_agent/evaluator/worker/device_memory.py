"""Whose fault a GPU out-of-memory error is: this evaluation's, or other processes' on the device.

Users share GPUs. When an allocation fails, the device's memory is counted at once: ``total``
and ``free`` (``cudaMemGetInfo``), what this process's caching allocator holds (``ours``: the
reference's and the candidate's tensors, still alive in the failing frames), and an allowance
for what this process holds outside the allocator (its CUDA context, library workspaces, a
candidate's own ``cudaMalloc``: ``OWN_ALLOWANCE_BYTES``). What is left (``others``) is held by
other processes. When ``others`` is more than ``FOREIGN_SHARE`` of the device and the failed
request (torch's "Tried to allocate N GiB", when the error says it) would have fitted without
them, the failure is named ``device_memory_contention`` at stage ``internal`` (the pool retries
an ``internal`` verdict once, ``cluster/pool.py``); otherwise it stays the candidate's (or the
reference's), and the message carries the count either way.

A candidate's own ``cudaMalloc`` beyond the allowance counts as "others": it can make its own
failure read as contention, which earns it a retry and still no verdict of correct. The
functions it could rebind are bound here at import, before any candidate code runs.

Does not free memory, wait for it, or retry (the pool does); cpu evaluations have no census.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

CONTENTION_FLAG = "device_memory_contention"
OWN_ALLOWANCE_BYTES = 2 << 30
FOREIGN_SHARE = 0.10
GIB = float(1 << 30)
_TRIED = re.compile(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB|TiB|PiB)")
_UNITS = {"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40, "PiB": 50}

_mem_get_info = torch.cuda.mem_get_info  # bound before candidate code can rebind them
_memory_reserved = torch.cuda.memory_reserved
_is_available = torch.cuda.is_available
_OutOfMemoryError = torch.OutOfMemoryError


class DeviceContention(Exception):
    """The problem's own code (its inputs, its model) ran out of device memory while other
    processes held it: not the problem's failure (``modes/evaluate.py`` makes it the named
    verdict)."""


def raise_if_contended(err: BaseException, what: str) -> None:
    """``DeviceContention`` when ``err`` is an out-of-memory error that others caused."""
    count = oom_census(err)
    if count is not None and count.contended:
        raise DeviceContention(contention_message(count, what)) from None


def is_device_oom(err: BaseException) -> bool:
    """Whether ``err`` is the GPU running out of memory (torch's error or a CUDA error text)."""
    if isinstance(err, _OutOfMemoryError):
        return True
    text = str(err)
    return "CUDA out of memory" in text or "CUDA error: out of memory" in text


def requested_bytes(err: BaseException) -> int | None:
    """The size of the request that failed, where torch's message says it (None: unknown)."""
    found = _TRIED.search(str(err))
    return int(float(found.group(1)) * (1 << _UNITS[found.group(2)])) if found else None


@dataclass(frozen=True)
class DeviceMemory:
    total: int
    free: int
    ours: int  # held by this process's caching allocator
    requested: int | None = None  # the failed request's size, when known

    @property
    def others(self) -> int:
        """What other processes hold (after this process's allowance), at least 0."""
        return max(0, self.total - self.free - self.ours - OWN_ALLOWANCE_BYTES)

    @property
    def contended(self) -> bool:
        """Other processes hold a large share, and the request would have fitted without them."""
        fits = self.requested is None or self.requested <= self.free + self.others
        return fits and self.others > FOREIGN_SHARE * self.total

    def text(self) -> str:
        return (
            f"the device had {self.free / GIB:.1f} GiB free of {self.total / GIB:.1f} GiB; "
            f"this evaluation's tensors held {self.ours / GIB:.1f} GiB, other processes about "
            f"{self.others / GIB:.1f} GiB"
        )


def device_memory(requested: int | None = None) -> DeviceMemory | None:
    """The current device's count (None without CUDA, or when the count itself fails)."""
    try:
        if not _is_available():
            return None
        free, total = _mem_get_info()
        ours = int(_memory_reserved())
    except Exception:
        return None
    return DeviceMemory(total=int(total), free=int(free), ours=ours, requested=requested)


def contention_message(count: DeviceMemory, what: str) -> str:
    return (
        f"the GPU ran out of memory during {what} while other processes used it ({count.text()}):"
        " the device was not free for this evaluation, which says nothing of the candidate"
    )


def oom_census(err: BaseException) -> DeviceMemory | None:
    """The count for an out-of-memory ``err`` (None for any other error, or without CUDA)."""
    return device_memory(requested_bytes(err)) if is_device_oom(err) else None
