"""A fresh cache that starts with the session's headers and compiled objects.

Tests that need a cache of their own (attacks rewrite what they find there; a fresh signing
key) would otherwise build the toolchain's light header index and the precompiled base header
again, about 30 s on the 2-core machine, and compile again every translation unit the session
has compiled already (the honest relu, the attack fixtures: 4-5 s each), before their first
extension. ``fresh_cache`` makes a folder beside the session cache whose ``builds/light``,
``builds/pch`` and ``builds/obj`` are hard links to the session's (the index and base header
built once per session by ``warm_up``, under its locks, whichever pytest worker comes first),
each sealed again with the new folder's own key: to that cache's harness they are entries it
built itself. Extensions (the linked modules), baselines and the key are the test's own, so
what a test checks about them starts from nothing.

What it does not do: share anything a candidate could change. Sandboxed candidates see
``builds/`` read-only; the unsandboxed attacks replace modules (``builds/ext``) and baselines,
which are not linked. (Were a linked object rewritten in place, the session's copy would fail
its own seal and be compiled again: the cost of a build, never a wrong verdict.)
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cuda_agent.core import secret
from cuda_agent.core.paths import builds_dir, cache_root

SHARED = ("light", "pch", "obj")


@functools.cache
def _warm_session_headers() -> Path:
    """The session cache's builds folder, with the cpu light index and base header built."""
    from cuda_agent.evaluator.builder.builder import warm_up

    warm_up("cpu", ((),))
    return builds_dir()


def fresh_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    """A new cache folder (mode 0755, reachable by the sandbox user) beside the session cache,
    seeded with the session's headers and objects, with ``CUDA_AGENT_CACHE`` pointing at it for
    the test; the caller removes it."""
    session_builds = _warm_session_headers()
    folder = Path(tempfile.mkdtemp(prefix="ca-fresh-", dir=cache_root().parent))
    folder.chmod(0o755)
    for name in SHARED:
        _link_tree(session_builds / name, folder / "builds" / name)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(folder))
    for sig in (folder / "builds").rglob(f"*{secret.SIG_SUFFIX}"):
        target = sig.with_name(sig.name[: -len(secret.SIG_SUFFIX)])
        sig.unlink()  # a link to the session's seal: replaced, not written through
        if target.is_file():
            secret.seal_file(target)  # with this folder's own key, made now
    return folder


def _link_tree(source: Path, target: Path) -> None:
    """``source``'s files hard-linked (copied across file systems) under ``target``, leaving out
    unfinished work (``.tmp`` folders, ``*.tmp`` files) and lock files."""
    if not source.is_dir():
        return
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if any(part == ".tmp" or part.endswith((".tmp", ".lock")) for part in relative.parts):
            continue
        destination = target / relative
        if path.is_dir():
            destination.mkdir(parents=True, exist_ok=True)
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, destination)
        except OSError:
            shutil.copy2(path, destination)
