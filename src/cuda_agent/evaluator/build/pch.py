"""A precompiled header of torch's light headers, shared by every C++ translation unit.

Parsing ``torch/types.h`` and torch's pybind11 casters dominates the compile time of a binding
file (about 20 s on a slow core, against about 9 s with this header precompiled). The header
is built once per (toolchain, compiler flags) into the build cache and used through
``-include``; a translation unit that includes no torch, ATen, c10 or pybind11 header does not
use it. If it cannot be built, units compile without it (same result, slower).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from cuda_agent.core.paths import ensure_dir

PRELUDE = "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n"
HEADER_NAME = "ca_prelude.h"
USES_TORCH = re.compile(r'^\s*#\s*include\s*[<"](torch/|ATen/|c10/|pybind11/)', re.M)


def wants_pch(text: str) -> bool:
    return bool(USES_TORCH.search(text))


def pch_header(root: Path, key: str) -> Path:
    """Where the header for ``key`` lives (whether or not it has been built yet)."""
    return root / "pch" / key / HEADER_NAME


def ensure_pch(header: Path, base_command: list[str], deadline: float) -> bool:
    """Build ``header`` and its ``.gch`` if missing; True when usable."""
    from cuda_agent.evaluator.build.builder import locked, seal, trusted  # avoid an import cycle

    gch = header.with_name(HEADER_NAME + ".gch")
    if gch.exists() and trusted(gch) and trusted(header):
        return True
    failed = header.with_name("FAILED")
    if failed.exists():
        return False
    folder = ensure_dir(header.parent)
    os.chmod(folder, 0o755)

    with locked(folder.parent / f"{folder.name}.lock", deadline):
        if gch.exists() and trusted(gch) and trusted(header):
            return True
        header.write_text(PRELUDE, encoding="utf-8")
        os.chmod(header, 0o644)
        seal(header)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".gch.tmp")
        os.close(fd)
        remaining = max(1.0, deadline - time.monotonic())
        try:
            proc = subprocess.run(
                [*base_command, "-x", "c++-header", str(header), "-o", tmp],
                cwd=folder,
                capture_output=True,
                timeout=remaining,
                check=False,
            )
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        if proc.returncode != 0:
            failed.write_bytes(proc.stdout[-4000:] + proc.stderr[-4000:])
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        os.chmod(tmp, 0o644)
        os.replace(tmp, gch)
        seal(gch)
    return True
