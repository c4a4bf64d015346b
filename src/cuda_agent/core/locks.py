"""Device timing locks: one lock file per device, so that processes sharing it never time at once.

A lock is ``flock`` on a file under ``locks_dir()``, opened read-only (it may sit on a
read-only bind inside a worker's sandbox). It serialises measurements, not whole jobs: the
dataset synthesiser's workers overlap their compilation on one GPU and take turns timing.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cuda_agent.core.paths import locks_dir


def device_lock_path(backend: str, visible: str | None) -> Path:
    """The timing lock of a device (``visible``: its ``CUDA_VISIBLE_DEVICES`` value)."""
    name = (visible or "all").replace(",", "_") if backend == "cuda" else "cpu"
    return locks_dir() / f"{backend}-{name}.lock"


@contextmanager
def device_lock(path: Path | None) -> Iterator[None]:
    """Hold ``path``'s exclusive lock (a no-op for ``None``). Opened read-only, so the file
    may sit on a read-only bind inside the worker's sandbox."""
    if path is None:
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
