"""Append-only JSON-lines files that survive a crash.

Each append is flushed and synced, so a crash loses at most the line being written; a torn
last line is skipped by the reader and the next append starts on a fresh line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def append_line(path: Path, data: dict[str, Any]) -> None:
    torn = path.exists() and path.stat().st_size > 0 and _last_byte(path) != b"\n"
    with open(path, "a", encoding="utf-8") as handle:
        if torn:  # a crash cut the last line: keep the new one on a line of its own
            handle.write("\n")
        handle.write(json.dumps(data, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON object in ``path`` (none if it does not exist)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a crash
        if isinstance(row, dict):
            rows.append(row)
    return rows


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)
