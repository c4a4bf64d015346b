"""Content hashes: SHA-256 over normalised text or over ordered (name, text) pairs."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def normalise_text(text: str) -> str:
    """Line endings to LF, so the same file hashes the same on every OS."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def text_hash(text: str) -> str:
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


def files_hash(files: Iterable[tuple[str, str]]) -> str:
    """Hash of named texts, independent of the order they are given in."""
    digest = hashlib.sha256()
    for name, text in sorted(files):
        digest.update(name.encode("utf-8") + b"\0")
        digest.update(normalise_text(text).encode("utf-8") + b"\0")
    return digest.hexdigest()
