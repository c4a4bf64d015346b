"""``make test-all``'s ``--dist loadgroup`` keeps an ``xdist_group`` on one worker.

The suite relies on it: the tests of a group make the same costly thing (the cuda flags'
precompiled headers, a ``transformers serve`` process, an exported package's build) and the later
ones find it made; side by side, each worker makes it again, or waits for the other's lock. It
failed silently once: pytest 9.2 moved a node's id from ``Node._nodeid`` to ``Node._id``, where
pytest-xdist 3.8 still writes the group's suffix, so every group was ignored (both nvcc tests of
``test_light.py`` took about 180 s, side by side, for the whole of pytest 9.2's time in the lock).
This runs pytest-xdist the way the Makefile does, on two grouped tests and two others, in a
folder of its own (no conftest of ours).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = """
import os
from pathlib import Path

import pytest

OUT = Path(__file__).parent / "workers"


def record(name):
    OUT.mkdir(exist_ok=True)
    (OUT / name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.xdist_group("together")
def test_first():
    record("first")


def test_other():
    record("other")


def test_another():
    record("another")


@pytest.mark.xdist_group("together")
def test_second():
    record("second")
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(textwrap.dedent(TESTS))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "-n", "2"]
    command += ["--dist", "loadgroup", "--no-loadscope-reorder", "test_grouped.py"]
    # not this run's xdist worker, options (a --junitxml) or timeout
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "test_first@together" in done.stdout, done.stdout[-3000:]  # xdist's group suffix
    workers = {p.name: p.read_text() for p in (tmp_path / "workers").iterdir()}
    assert len(workers) == 4 and workers["first"] == workers["second"], workers
