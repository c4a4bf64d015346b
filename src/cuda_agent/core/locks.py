"""Device locks: one lock file per device, so that processes sharing it never time at once.

A device's lock is ``flock`` on a file under ``locks_dir()``, opened read-only (it may sit on a
read-only bind inside a worker's sandbox), used as a readers-writer lock (``TurnLock``):

* **exclusive** (``LOCK_EX``): the device alone, for what measures time (timing rounds, the
  stream check, the kernel record, a torch.compile baseline's timing, the synthesiser's
  measurements);
* **shared** (``LOCK_SH``): device work that measures nothing and may overlap other shared
  work (building the reference, verification trials, the memory check), never a timing.

A second file beside it, the *gate* (``NAME.lock.gate``), gives a waiting exclusive taker
priority: every taker passes the gate (held exclusively for the moment of taking the lock), and
a taker of the exclusive lock holds the gate while it waits, so no new shared holder slips in
and the timing job is not starved by overlapping verifications. Where the gate file is missing
(a lock folder made by an older version) the lock works without it.

``exclusive_file_lock`` is the plain form: one ``flock`` held exclusively, for a short decision
two processes must not make at once (a shared worker template's connect-or-start and its
stop, ``evaluator/launch/shared_template.py``).

It serialises measurements, not whole jobs: the pool's jobs overlap their compilation and their
verification on one GPU and take turns timing. What it does not do: bound how long a holder
keeps the lock (the worker's deadline and the device budget do).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cuda_agent.core.paths import ensure_dir, locks_dir


def device_lock_path(backend: str, visible: str | None) -> Path:
    """The lock file of a device (``visible``: its ``CUDA_VISIBLE_DEVICES`` value)."""
    name = (visible or "all").replace(",", "_") if backend == "cuda" else "cpu"
    return locks_dir() / f"{backend}-{name}.lock"


def gate_path(path: Path | str) -> Path:
    """The gate file that gives a device lock's exclusive takers priority."""
    path = Path(path)
    return path.with_name(path.name + ".gate")


def ensure_lock_files(path: Path) -> Path:
    """Create ``path`` and its gate (a parent's job: a sandboxed worker sees them read-only)."""
    ensure_dir(path.parent)
    path.touch(exist_ok=True)
    gate_path(path).touch(exist_ok=True)
    return path


class TurnLock:
    """The readers-writer lock of one device (module docstring); ``mode`` is ``"shared"``,
    ``"exclusive"`` or ``""`` (not held)."""

    def __init__(self, path: Path | str) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        try:
            self._gate: int | None = os.open(gate_path(path), os.O_RDONLY)
        except OSError:
            self._gate = None
        self.mode = ""

    def take(self, exclusive: bool, wait: bool = True) -> bool:
        """Take the lock in the mode asked (releasing first whatever mode is held); with
        ``wait=False``, only if that is possible at once (returns whether it was taken)."""
        if self.mode:
            self.release()
        now = 0 if wait else fcntl.LOCK_NB
        try:
            if self._gate is not None:
                fcntl.flock(self._gate, fcntl.LOCK_EX | now)
            try:
                fcntl.flock(self._fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | now)
            finally:
                if self._gate is not None:
                    fcntl.flock(self._gate, fcntl.LOCK_UN)
        except BlockingIOError:
            return False
        self.mode = "exclusive" if exclusive else "shared"
        return True

    def release(self) -> None:
        if self.mode:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self.mode = ""

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.release()
        for fd in (self._fd, self._gate):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


@contextmanager
def device_lock(path: Path | None) -> Iterator[None]:
    """Hold ``path``'s lock exclusively (a no-op for ``None``)."""
    if path is None:
        yield
        return
    lock = TurnLock(path)
    try:
        lock.take(exclusive=True)
        yield
    finally:
        lock.close()


@contextmanager
def exclusive_file_lock(path: Path | str) -> Iterator[None]:
    """``flock`` on ``path`` (created ``0600`` if missing), held exclusively, waited for.
    ``OSError`` if the file cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
