"""Every test file is collected by the suite's own configuration.

pytest skips folders named like build output (its default ``norecursedirs`` holds ``build``,
``dist``, ``*.egg`` and more) without a word: a package folder ``evaluator/build/`` once kept
46 builder tests out of every run. This walks the tree the way ``pytest`` run from the
repository root does (``tests.collection_probe`` records the files it would import) and
compares that with every ``test_*.py`` / ``*_test.py`` file under ``tests/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = ["-m", "pytest", "--collect-only", "-q", "-p", "tests.collection_probe"]
PROBE += ["-p", "no:cacheprovider", "-p", "no:xdist"]


def reached_by_collection(root: Path, out: Path) -> set[Path]:
    """The test files ``python -m pytest`` started in ``root`` would import."""
    env = {
        **os.environ,
        "CUDA_AGENT_COLLECTION_PROBE": str(out),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, *PROBE],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]  # 5: no tests
    lines = out.read_text().splitlines() if out.exists() else []
    return {Path(line).resolve() for line in lines}


def files_on_disk(root: Path) -> set[Path]:
    tests = root / "tests"
    found = set(tests.rglob("test_*.py")) | set(tests.rglob("*_test.py"))
    return {p.resolve() for p in found if "__pycache__" not in p.parts}


def test_every_test_file_is_collected(tmp_path: Path) -> None:
    missing = files_on_disk(REPO) - reached_by_collection(REPO, tmp_path / "seen.txt")
    names = sorted(str(p.relative_to(REPO)) for p in missing)
    assert not names, f"test files that pytest never collects (a hidden folder?): {names}"


def test_the_check_sees_a_folder_that_pytest_hides(tmp_path: Path) -> None:
    """The check itself can fail: a project with this repository's configuration and a test
    folder named ``build`` (hidden by pytest's defaults) is reported."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for rel in ("tests/test_seen.py", "tests/build/test_hidden.py", "tests/dist/test_too.py"):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("def test_nothing() -> None:\n    pass\n")
    seen = reached_by_collection(tmp_path, tmp_path / "seen.txt")
    missing = files_on_disk(tmp_path) - seen
    assert (tmp_path / "tests" / "test_seen.py").resolve() in seen
    assert missing == {
        (tmp_path / "tests" / "build" / "test_hidden.py").resolve(),
        (tmp_path / "tests" / "dist" / "test_too.py").resolve(),
    }
