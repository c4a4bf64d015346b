"""``cuda-agent cache show|prune|clear`` through the real CLI on a cache folder of known
entries: sizes per part, least recently used removed first, the signing secret never, one
line and exit 2 for a size it cannot read or a clear without --yes (issue 50: caches filled the
disk and nothing said how big they were or how to prune them)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cuda_agent.core.cache_usage import cache_cap
from cuda_agent.core.errors import ConfigError
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
    assert data["cap_bytes"] == 10 * 1024**3  # CUDA_AGENT_CACHE_MAX's default
    assert parts["models"]["bytes"] == 2000
    text = run_cli("cache", "show", env=env).stdout
    assert "builds/pch" in text and "cuda-agent cache prune --max-size" in text
    assert "cap 10.0 GB" in text and "CUDA_AGENT_CACHE_MAX" in text

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


def test_an_evaluation_keeps_the_cache_under_its_cap(tmp_path: Path) -> None:
    """CUDA_AGENT_CACHE_MAX holds by itself: the first evaluation of a process removes entries
    unused for an hour or more, oldest first, until the cache fits; recent ones stay even
    while the cache is still over its cap (they may be in use)."""
    root = tmp_path / "cache"
    old = entry(root, "builds/pch", "old", 3000, age_s=7200)
    older = entry(root, "models", "older", 1000, age_s=9000)
    recent = root / "builds" / "ext" / "recent"  # used just now
    recent.mkdir(parents=True)
    (recent / "data").write_bytes(b"x" * 2500)
    solution = tmp_path / "broken.py"
    solution.write_text("import torch\n\nclass ModelNew(:\n    pass\n")
    env = {"CUDA_AGENT_CACHE": str(root), "CUDA_AGENT_CACHE_MAX": "2K"}

    done = run_cli("eval", "relu", str(solution), "--backend", "cpu", env=env)
    assert done.returncode == 0 and "syntax error" in done.stdout, done.stdout + done.stderr
    assert not old.exists() and not older.exists()  # both unused for an hour: over the cap
    assert (recent / "data").is_file()  # in use, perhaps: kept, though still over the cap
    said = " ".join(done.stderr.split())
    assert "over its cap of 2.0 KB (CUDA_AGENT_CACHE_MAX): removed 2 entries" in said, said

    bad = run_cli("eval", "relu", str(solution), "--backend", "cpu",
                  env={**env, "CUDA_AGENT_CACHE_MAX": "lots"})  # fmt: skip
    errors = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr
    assert len(errors) == 1 and "CUDA_AGENT_CACHE_MAX" in errors[0], bad.stderr


def test_the_cap_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_AGENT_CACHE_MAX", raising=False)
    assert cache_cap() == 10 * 1024**3
    monkeypatch.setenv("CUDA_AGENT_CACHE_MAX", "500M")
    assert cache_cap() == 500 * 1024**2
    monkeypatch.setenv("CUDA_AGENT_CACHE_MAX", "off")
    assert cache_cap() is None
    monkeypatch.setenv("CUDA_AGENT_CACHE_MAX", "-1G")
    with pytest.raises(ConfigError, match="CUDA_AGENT_CACHE_MAX"):
        cache_cap()
