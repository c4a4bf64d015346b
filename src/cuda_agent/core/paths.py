"""Where CUDA Agent keeps its caches (builds, baselines) and per-evaluation scratch space.

Everything lives under one root, ``$CUDA_AGENT_CACHE`` or ``~/.cache/cuda-agent``. Nothing here
creates files except ``ensure_dir``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    env = os.environ.get("CUDA_AGENT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cuda-agent"


def builds_dir() -> Path:
    return cache_root() / "builds"


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
