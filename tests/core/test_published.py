"""``build_once``: built once, published whole, nothing left behind, and two builders that race
(real processes, released together by a file) both end with the one folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.core.published import build_once
from tests.helpers import wait_for

RACER = """
import json, os, sys, time
from pathlib import Path
from cuda_agent.core.published import build_once

folder, go, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

def build(path):
    path.mkdir()
    (path / "who").write_text(me)
    ready = go.parent / f"ready-{me}"
    ready.write_text("")  # this builder is inside its build
    while not go.exists():  # released once both builders are inside
        os.sched_yield()
    (path / "config.json").write_text(json.dumps({"by": me}))

print(build_once(folder, build))
"""


def test_built_once_and_found_after(tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(path: Path) -> None:
        calls.append(path)
        path.mkdir()
        (path / "config.json").write_text("{}")

    folder = tmp_path / "cache" / "thing-1"
    assert build_once(folder, build) == folder and (folder / "config.json").is_file()
    assert calls and calls[0].parent.parent == folder.parent  # staged beside the target
    assert build_once(folder, build) == folder and len(calls) == 1  # found, not built again
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no staging left


def test_a_failing_build_publishes_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    def build(path: Path) -> None:
        path.mkdir()
        (path / "half").write_text("half a folder")
        raise RuntimeError("the build broke")

    folder = tmp_path / "cache" / "thing-2"
    with pytest.raises(RuntimeError, match="the build broke"):
        build_once(folder, build)
    assert list(folder.parent.iterdir()) == []


@pytest.mark.slow  # two interpreters
def test_two_builders_racing_end_with_one_folder(tmp_path: Path) -> None:
    folder, go = tmp_path / "cache" / "thing-3", tmp_path / "go"
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(folder), str(go), name],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        inside = wait_for(lambda: all((tmp_path / f"ready-{n}").exists() for n in ("a", "b")))
        assert inside, "the two builders were never inside their builds at once"
        go.write_text("")
        outputs = [r.communicate(timeout=120)[0].strip() for r in racers]
    finally:
        for racer in racers:
            racer.kill()
    assert [r.returncode for r in racers] == [0, 0]
    assert outputs == [str(folder), str(folder)]
    winner = json.loads((folder / "config.json").read_text())["by"]
    assert (folder / "who").read_text() == winner  # one builder's whole folder, not a mix
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
