"""Small JSON cache entries signed with the harness's key (``core/secret.py``).

A cache whose entries decide verdicts (the torch.compile baselines, the memory check's verdicts)
stores each entry as one JSON object with an ``hmac`` field over its cache key and content. An
entry that is missing, unreadable or fails its signature reads as None, so a forged or
corrupted entry is computed again, never used. Writes are atomic (a temporary file renamed).
Only the harness process reads and writes these: a sandboxed worker has no key.

What it does not do: choose keys or decide what may be cached (each cache's own module does).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from cuda_agent.core import secret

log = logging.getLogger(__name__)

SIGNATURE_KEY = "hmac"


def read_entry(path: Path, key: str) -> dict[str, Any] | None:
    """The entry at ``path`` for ``key``, or None when missing, unreadable or failing its
    signature (a forged or corrupted entry is logged)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    signature = data.pop(SIGNATURE_KEY, None)
    if not isinstance(signature, str) or not secret.verify(_signed(key, data), signature):
        log.warning("cache entry %s failed its integrity check: computing it again", path)
        return None
    return data


def write_entry(path: Path, key: str, data: dict[str, Any]) -> None:
    """Write ``data`` as the signed entry for ``key`` at ``path``, atomically."""
    record = {**data, SIGNATURE_KEY: secret.sign(_signed(key, data))}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, indent=1)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def _signed(key: str, data: dict[str, Any]) -> bytes:
    """The bytes an entry's signature covers: its cache key and its content."""
    return (key + "\0" + json.dumps(data, sort_keys=True, separators=(",", ":"))).encode()
