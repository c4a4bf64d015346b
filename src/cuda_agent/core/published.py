"""``build_once``: a cache folder built in a staging folder beside it and renamed into place.

Readers never see half a folder: the build writes into a fresh temporary folder in the same
parent, and one ``os.replace`` publishes it. When two processes build the same folder at once,
the first rename wins and the second finds the finished copy (its rename fails, and the marker
file is there), so both return the one folder. A build that raises publishes nothing and
leaves no staging folder behind.

What it does not do: lock (two processes may both build; one result is kept), check an existing
folder's contents beyond its marker file, or remove a stale folder (callers that record a
source digest check it themselves).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def build_once(folder: Path, build: Callable[[Path], object], marker: str = "config.json") -> Path:
    """``folder``, built first by ``build(path)`` unless ``folder / marker`` exists already.

    ``build`` gets a path that does not exist yet, inside a staging folder beside ``folder``,
    and must create it, ``marker`` included (what it returns is not used)."""
    if (folder / marker).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build(staging / "built")
        try:
            os.replace(staging / "built", folder)
        except OSError:
            if not (folder / marker).is_file():  # not another process's finished copy
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
