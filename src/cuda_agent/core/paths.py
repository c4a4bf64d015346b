"""Where CUDA Agent keeps its caches (builds, baselines) and per-evaluation scratch space, and
where the package itself is installed.

Caches live under one root, ``$CUDA_AGENT_CACHE`` or ``~/.cache/cuda-agent``. ``package_root``
is the ``cuda_agent`` folder (its parent goes on a child process's ``PYTHONPATH``), found without
importing the package root. Nothing here creates files except ``ensure_dir``.
"""

from __future__ import annotations

import os
from pathlib import Path


def package_root() -> Path:
    """The installed ``cuda_agent`` package folder (resolved)."""
    return Path(__file__).resolve().parent.parent


def cache_root() -> Path:
    env = os.environ.get("CUDA_AGENT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cuda-agent"


def builds_dir() -> Path:
    return cache_root() / "builds"


PRIVATE_BUILDS_ENV = "CUDA_AGENT_PRIVATE_BUILDS"  # where to build when the cache is read-only


def private_builds_dir() -> Path | None:
    """A sandboxed worker's own build folder (its ``builds_dir()`` is read-only), or None."""
    private = os.environ.get(PRIVATE_BUILDS_ENV)
    return Path(private) if private else None


def baselines_dir() -> Path:
    return cache_root() / "baselines"


def locks_dir() -> Path:
    """Lock files that serialise timing on one device across worker processes."""
    return cache_root() / "locks"


def scratch_dir() -> Path:
    return cache_root() / "scratch"


def ensure_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
