"""``requirements.lock`` is closed under its requirements: ``make`` installs it without
resolving (``--no-deps``, in parallel pip processes), so a pin it lacks would simply be missing.

Every distribution the lock pins must be installed at its pinned version, and each of its
``Requires-Dist`` (markers evaluated for this interpreter, no extras) must be met by another
pin of the lock. ``requirements-nodeps.lock`` (the model parts, whose declared dependencies are
left out on purpose) is not held to it.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def pins(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of a lock's ``name==version`` lines."""
    found = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line!r}"
            found[canonicalize_name(name)] = version
    return found


def unmet(lock: dict[str, str]) -> list[str]:
    """Each installed pin's requirement that no pin of ``lock`` meets, as ``pin: requirement``."""
    missing = []
    for name in lock:
        for raw in importlib.metadata.distribution(name).requires or []:
            requirement = Requirement(raw)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            pinned = lock.get(canonicalize_name(requirement.name))
            if pinned is None or not requirement.specifier.contains(pinned, prereleases=True):
                missing.append(f"{name}: {raw} (lock: {pinned or 'none'})")
    return missing


def test_the_lock_is_closed_under_its_requirements() -> None:
    lock = pins((ROOT / "requirements.lock").read_text(encoding="utf-8"))
    other = {
        name: version
        for name in lock
        if not SpecifierSet(f"=={lock[name]}").contains(
            version := importlib.metadata.version(name), prereleases=True
        )
    }
    if other:  # a GPU host's own torch, say: its requirements are not the pinned one's
        pytest.skip(f"this environment is not the lock's: {other}")
    assert unmet(lock) == []


def test_a_lock_without_a_requirement_of_its_pins_is_named() -> None:
    lock = pins((ROOT / "requirements.lock").read_text(encoding="utf-8"))
    del lock["setuptools"]  # torch requires it; pip freeze leaves it out
    assert [line for line in unmet(lock) if line.startswith("torch:")] == [
        "torch: setuptools>=77.0.3 (lock: none)"
    ]
