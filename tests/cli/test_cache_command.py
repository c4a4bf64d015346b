"""``cuda-agent cache show|prune|clear`` through the real CLI on a cache folder of known
entries: sizes per part, least recently used removed first, the signing secret never, one
line and exit 2 for a size it cannot read or a clear without --yes (issue 50: caches filled the
disk and nothing said how big they were or how to prune them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers import assert_one_line_exit_2, run_cli


def entry(root: Path, part: str, name: str, size: int, age_s: float) -> Path:
    folder = root / part / name
    folder.mkdir(parents=True)
    (folder / "data").write_bytes(b"x" * size)
    when = 1_700_000_000 - age_s
    for path in (folder / "data", folder):
        os.utime(path, (when, when))
    return folder


def test_the_cache_is_shown_pruned_oldest_first_and_cleared(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    pch = entry(root, "builds/pch", "aaa", 3000, age_s=3000)
    (root / "builds/pch/aaa.lock").touch()
    ext = entry(root, "builds/ext", "bbb", 1000, age_s=2000)
    model = entry(root, "models", "ccc", 2000, age_s=1000)
    (root / "secret").mkdir()
    (root / "secret" / "key").write_bytes(b"k" * 32)
    env = {"CUDA_AGENT_CACHE": str(root)}

    shown = run_cli("cache", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    parts = {p["part"]: p for p in data["parts"]}
    assert data["bytes"] == 6000 and parts["builds/pch"]["entries"] == 1  # the lock with it
    assert parts["models"]["bytes"] == 2000
    text = run_cli("cache", "show", env=env).stdout
    assert "builds/pch" in text and "cuda-agent cache prune --max-size" in text

    pruned = run_cli("cache", "prune", "--max-size", "3K", "--json", env=env)
    assert pruned.returncode == 0, pruned.stderr
    assert [r["path"] for r in json.loads(pruned.stdout)["removed"]] == [str(pch)]
    assert not pch.exists() and not (root / "builds/pch/aaa.lock").exists()
    assert ext.exists() and model.exists()

    assert_one_line_exit_2(run_cli("cache", "clear", env=env), "--yes")
    assert_one_line_exit_2(run_cli("cache", "prune", "--max-size", "lots", env=env), "--max-size")
    cleared = run_cli("cache", "clear", "--yes", env=env)
    assert cleared.returncode == 0 and "removed 2 entries" in cleared.stdout
    assert not ext.exists() and not model.exists()
    assert (root / "secret" / "key").is_file()  # the verdicts' signing secret stays
