"""The build cache's file-level guards, shared by the builder and the caches it fills.

``trusted``/``usable`` check a cached file's seal before it is used, ``seal`` signs a file the
harness just put into the cache, ``locked`` serialises the makers of one entry. The builder
(objects, extensions), ``light_index`` (the light layout's header index) and ``pch``
(precompiled headers) all use them; nothing here compiles, and nothing here decides a cache key.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from cuda_agent.core import secret
from cuda_agent.core.paths import ensure_dir

log = logging.getLogger(__name__)


def trusted(path: Path) -> bool:
    """Whether a cached file may be used: its seal checks. A sandboxed process cannot check
    (it cannot read the key) and needs not: the shared cache is read-only to every sandboxed
    process, so only the harness wrote what it finds there."""
    if not secret.available():
        return True
    if secret.sealed_digest(path) is None:
        log.warning("build cache entry %s failed its integrity check: rebuilding it", path)
        return False
    return True


def usable(path: Path) -> bool:
    """A cached file that exists and passes its integrity check."""
    return path.exists() and trusted(path)


def seal(path: Path, entry: str | None = None) -> None:
    """Sign a file the harness just put into the cache (nothing to do in a sandbox)."""
    if secret.available():
        secret.seal_file(path, entry)


@contextlib.contextmanager
def locked(path: Path, deadline: float) -> Iterator[None]:
    """An exclusive file lock, waited for until ``deadline`` (then proceed without it)."""
    ensure_dir(path.parent)
    with open(path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break  # build anyway; the final rename stays atomic
                time.sleep(0.05)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)
