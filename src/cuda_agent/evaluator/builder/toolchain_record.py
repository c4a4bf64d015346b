"""The discovered toolchain, remembered on disk so that a cache hit costs a lookup.

Finding the toolchain imports torch and ``torch.utils.cpp_extension``, runs the compilers for
their versions and, without ``TORCH_CUDA_ARCH_LIST``, asks the GPU for its compute
capability: about a second in a process that has not imported torch (the command line, a
pool's parent), spent on every build, cached or not. The result depends only on things that
can be read without importing anything: the interpreter, torch's installed files, the
compilers' files, the GPU models and a few environment variables. Their fingerprint keys a
record in the build cache (``builds/toolchains/<key>.json``), sealed like every cache entry,
so a second process finds the toolchain in a few milliseconds.

What it does not do: decide what the toolchain is (``toolchain.discover`` does, and calls
``lookup`` / ``remember``), or trust a record it cannot verify (a record whose seal fails
is ignored and made again).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from cuda_agent.core import secret
from cuda_agent.core.paths import builds_dir

log = logging.getLogger(__name__)

RECORD_VERSION = "1"
ENV_KEYS = ("CXX", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST", "CUDA_VISIBLE_DEVICES")
GPU_INFO = Path("/proc/driver/nvidia/gpus")


def fingerprint(backend: str) -> str:
    """What the toolchain of ``backend`` depends on, hashed (imports nothing)."""
    parts = [RECORD_VERSION, backend, sys.executable, sys.version]
    parts += [f"{k}={os.environ.get(k, '')}" for k in ENV_KEYS]
    parts += [f"PATH-cxx={shutil.which('g++') or ''}:{shutil.which('c++') or ''}"]
    parts += [_stat(shutil.which("g++")), _stat(os.environ.get("CXX"))]
    parts += _torch_files()
    if backend == "cuda":
        parts += [_stat(shutil.which("nvcc"))]
        for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
            parts.append(_stat(str(Path(home) / "bin" / "nvcc")) if home else "")
        parts += _gpu_models()
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def record_path(backend: str) -> Path:
    return builds_dir() / "toolchains" / f"{backend}-{fingerprint(backend)}.json"


def lookup(backend: str) -> dict[str, Any] | None:
    """The remembered toolchain fields of ``backend`` here, or None (never recorded, stale,
    or its seal fails)."""
    path = record_path(backend)
    if not path.exists():
        return None
    if secret.available() and secret.sealed_digest(path) is None:
        log.warning("toolchain record %s failed its integrity check: discovering again", path)
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("backend") == backend else None


def remember(toolchain: Any) -> None:
    """Write the toolchain's fields (a dataclass) for the next process; best effort (a
    read-only cache, as in a sandboxed worker, just means the next process discovers too)."""
    path = record_path(toolchain.backend)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fields = dataclasses.asdict(toolchain)
        with tempfile.NamedTemporaryFile(
            "w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8"
        ) as out:
            json.dump(fields, out, sort_keys=True)
        os.replace(out.name, path)
        if secret.available():
            secret.seal_file(path)


def _stat(path: str | None) -> str:
    """A file's identity: its real path, size and modification time ('' when absent)."""
    if not path:
        return ""
    try:
        real = os.path.realpath(path)
        info = os.stat(real)
    except OSError:
        return f"{path}:missing"
    return f"{real}:{info.st_size}:{info.st_mtime_ns}"


def _torch_files() -> list[str]:
    """torch's version and the files an import would load, found without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return ["torch:missing"]
    folder = Path(spec.origin).parent
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    compiled = sorted(str(p) for p in folder.glob("_C*.so"))
    return [
        f"torch={version}",
        _stat(spec.origin),
        _stat(str(folder / "version.py")),
        *(_stat(p) for p in compiled),
        _stat(str(folder / "lib" / "libtorch_cpu.so")),
    ]


def _gpu_models() -> list[str]:
    """The GPUs' models as the driver lists them (what decides the compute capability)."""
    try:
        entries = sorted(GPU_INFO.iterdir())
    except OSError:
        return ["gpus:none"]
    models = []
    for entry in entries:
        with contextlib.suppress(OSError):
            for line in (entry / "information").read_text().splitlines():
                if line.startswith("Model:"):
                    models.append(line.split(":", 1)[1].strip())
    return [f"gpu={m}" for m in models] or ["gpus:unknown"]
