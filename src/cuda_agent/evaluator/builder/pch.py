"""Precompiled headers (g++) for C++ translation units, shared through the build cache.

Parsing torch's headers dominates the compile time of a binding file. Three headers are
precompiled, each once per (toolchain, compiler flags, header text), and used through
``-include``: the light layout's base header (``ca_light_cxx.h``, see ``light.py``) for
``load_inline``'s ``main.cpp``; stock's own prelude (``torch/extension.h``) for the same file
in the stock layout; and ``PRELUDE`` (``torch/types.h`` + torch's pybind11 casters) for the
binding files of workdirs and ``load`` calls that include a torch header. A precompiled header
changes nothing about what compiles (g++ checks that flags and macros match); if one cannot be
built, units compile without it (same result, slower).
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
from cuda_agent.evaluator.builder.cache_entry import locked, seal, trusted
from cuda_agent.evaluator.builder.compile_sandbox import confine_compiler

PRELUDE = "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n"
HEADER_NAME = "ca_prelude.h"
USES_TORCH = re.compile(r'^\s*#\s*include\s*[<"](torch/|ATen/|c10/|pybind11/)', re.M)


def wants_pch(text: str) -> bool:
    return bool(USES_TORCH.search(text))


def pch_header(root: Path, key: str) -> Path:
    """Where the header for ``key`` lives (whether or not it has been built yet)."""
    return root / "pch" / key / HEADER_NAME


def gch_of(header: Path) -> Path:
    """The precompiled form of ``header``, where g++ looks for it beside the header."""
    return header.with_name(header.name + ".gch")


def ensure_pch(header: Path, text: str, base_command: list[str], deadline: float) -> bool:
    """Write ``header`` (``text``) and build its ``.gch`` if missing; True when usable."""
    gch = gch_of(header)
    if gch.exists() and trusted(gch) and trusted(header):
        _mark_used(header.parent)
        return True
    failed = header.with_name("FAILED")
    if failed.exists():
        return False
    folder = ensure_dir(header.parent)
    os.chmod(folder, 0o755)

    with locked(folder.parent / f"{folder.name}.lock", deadline):
        if gch.exists() and trusted(gch) and trusted(header):
            return True
        header.write_text(text, encoding="utf-8")
        os.chmod(header, 0o644)
        seal(header)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".gch.tmp")
        os.close(fd)
        remaining = max(1.0, deadline - time.monotonic())
        try:
            # confined: the candidate's flags (``-include``, ``-I``) could read any file
            argv, env = confine_compiler(
                [*base_command, "-x", "c++-header", str(header), "-o", tmp], folder
            )
            proc = subprocess.run(
                argv,
                cwd=folder,
                env=env,
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


def _mark_used(folder: Path) -> None:
    """The entry's last use, for ``cuda-agent cache prune`` (least recently used first)."""
    with contextlib.suppress(OSError):
        os.utime(folder)
