"""What the cache root holds, and making it smaller: sizes per part, least recently used first.

The cache root (``paths.cache_root()``) holds parts that can all be made again, each a folder
of entries (``PARTS``): precompiled headers, compiled objects and extensions, baselines,
memory-check answers, converted models, curriculum problem sets, lint results, scratch. An
entry is one child of a part's folder (a precompiled header's key folder, one extension, one
model), with its sibling lock file where it has one. ``KEPT`` is never removed: the signing
secret of the cached verdicts and the lock files of running work.

* ``usage(root)``: per part, its bytes, entries and the oldest and newest last use (the newest
  modification time of anything in an entry; the builder marks a precompiled header each time
  a build uses it, ``builder/pch.py``);
* ``prune(root, max_bytes)``: removes whole entries, least recently used first, until the
  parts hold at most ``max_bytes``; returns what it removed;
* ``clear(root)``: removes every entry of every part;
* ``keep_under_cap_once(root)``: the cap that holds by itself (``cache_cap``:
  ``CUDA_AGENT_CACHE_MAX``, default 10G, ``off`` for none), the first time a process asks
  (the evaluation pipeline does, before its first build: ``evaluator/pipeline.prepare``):
  where the parts hold more, ``prune`` removes entries unused for at least ``GRACE_S`` (an
  hour), least recently used first, until they fit.

What it does not do: coordinate with running evaluations. An entry removed while a build reads
it can fail that build: prune or clear when nothing is evaluating (``cuda-agent cache`` says
so). The cap keeps away from that by its grace: an entry in use was used within the hour (a
build marks the precompiled header it reads), so only the cache's older part is removed, and
the cap may be exceeded while all of it is recent.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.core.errors import ConfigError

log = logging.getLogger(__name__)

PARTS = {
    "builds/pch": "precompiled headers (g++), one per toolchain, flags and header",
    "builds/obj": "compiled translation units",
    "builds/ext": "linked extensions",
    "builds/light": "light-layout header indexes",
    "baselines": "eager and torch.compile timings per problem and device",
    "memory-checks": "memory-check answers per solution",
    "models": "converted models (tiny, SmolLM2, Qwen2.5-Coder)",
    "curriculum": "curriculum problem sets",
    "problem_lint": "problem lint results",
    "scratch": "per-evaluation scratch space",
}
KEPT = ("secret", "locks", "builds/locks", "builds/toolchains", "builds/tmp")
UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
CAP_ENV = "CUDA_AGENT_CACHE_MAX"
DEFAULT_CAP = "10G"
GRACE_S = 3600.0  # an entry used this recently is never removed by the cap


@dataclass
class Entry:
    part: str
    path: Path
    bytes: int
    last_use: float  # epoch seconds


@dataclass
class PartUsage:
    part: str
    about: str
    bytes: int = 0
    entries: int = 0
    oldest: float | None = None
    newest: float | None = None
    listed: list[Entry] = field(default_factory=list, repr=False)


def parse_size(text: str) -> int:
    """``5G``, ``500M``, ``1024`` (bytes) -> bytes; ValueError for anything else."""
    value = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = value[-1:] if value[-1:] in UNITS and value[-1:] else ""
    number = value[: len(value) - len(unit)]
    try:
        amount = float(number)
    except ValueError:
        raise ValueError(f"size {text!r}: a number with K, M, G or T (5G, 500M)") from None
    if amount < 0:
        raise ValueError(f"size {text!r}: must not be negative")
    return int(amount * UNITS[unit])


def human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def entries(root: Path) -> list[Entry]:
    """Every entry of every part under ``root`` (lock files beside an entry belong to it)."""
    out: list[Entry] = []
    for part in PARTS:
        folder = root / part
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            if child.suffix == ".lock" and child.with_suffix("").exists():
                continue  # counted with its entry
            size, last = _measure(child)
            out.append(Entry(part, child, size, last))
    return out


def usage(root: Path) -> list[PartUsage]:
    parts = {part: PartUsage(part, about) for part, about in PARTS.items()}
    for entry in entries(root):
        usage_of = parts[entry.part]
        usage_of.bytes += entry.bytes
        usage_of.entries += 1
        usage_of.listed.append(entry)
        usage_of.oldest = min(usage_of.oldest or entry.last_use, entry.last_use)
        usage_of.newest = max(usage_of.newest or entry.last_use, entry.last_use)
    return list(parts.values())


def prune(root: Path, max_bytes: int, unused_for_s: float = 0.0) -> list[Entry]:
    """Remove entries, least recently used first, until the parts hold ``max_bytes`` or less;
    never one used in the last ``unused_for_s`` seconds."""
    listed = sorted(entries(root), key=lambda e: e.last_use)
    total = sum(e.bytes for e in listed)
    removed: list[Entry] = []
    now = time.time()
    for entry in listed:
        if total <= max_bytes or now - entry.last_use < unused_for_s:
            break
        _remove(entry.path)
        total -= entry.bytes
        removed.append(entry)
    return removed


def clear(root: Path) -> list[Entry]:
    return prune(root, 0)


def cache_cap() -> int | None:
    """The cache's cap in bytes from ``CUDA_AGENT_CACHE_MAX`` (``off``: None); a bad value is
    a ``ConfigError`` naming the variable."""
    text = os.environ.get(CAP_ENV, DEFAULT_CAP).strip()
    if text.lower() in ("off", "none", "0"):
        return None
    try:
        return parse_size(text)
    except ValueError as err:
        raise ConfigError(f"{CAP_ENV}: {err}, or off") from None


_CAPPED = threading.Lock()
_capped_once = False


def keep_under_cap_once(root: Path) -> list[Entry]:
    """Entries unused for ``GRACE_S`` or more removed, least recently used first, until the
    cache fits ``cache_cap()``, the first time a process asks; later calls do nothing (a
    process's own builds are recent, so the grace keeps them anyway). Says what it removed in
    one logged line."""
    global _capped_once
    with _CAPPED:
        if _capped_once:
            return []
        _capped_once = True
        cap = cache_cap()
        removed = [] if cap is None else prune(root, cap, GRACE_S)
    if removed and cap is not None:
        log.warning(
            "the cache %s was over its cap of %s (%s): removed %d entries unused for an hour "
            "or more, %s, least recently used first",
            root, human(cap), CAP_ENV, len(removed), human(sum(e.bytes for e in removed)),
        )  # fmt: skip
    return removed


def _measure(path: Path) -> tuple[int, float]:
    size, last = 0, _mtime(path)
    if path.is_dir() and not path.is_symlink():
        for folder, _, files in os.walk(path):
            last = max(last, _mtime(Path(folder)))
            for name in files:
                try:
                    info = os.lstat(os.path.join(folder, name))
                except OSError:
                    continue
                size += info.st_size
                last = max(last, info.st_mtime)
    else:
        with contextlib.suppress(OSError):
            size = os.lstat(path).st_size
    return size, last


def _mtime(path: Path) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return time.time()


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    path.with_name(path.name + ".lock").unlink(missing_ok=True)
