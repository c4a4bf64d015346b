"""Regression: starting sandboxed processes from several threads while another thread imports
for the first time must neither deadlock nor corrupt locks.

With ``preexec_fn`` (how the sandbox once applied its limits) each start ran the fork handlers
in a process with threads; ``logging``'s handler then released a lock it did not hold
("RuntimeError: release unlocked lock", printed as "Exception ignored"), and a bench of 227
solutions deadlocked on logging's and the import lock. The child now confines itself after
``exec``; nothing runs between ``fork`` and ``exec``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent(
    """
    import tempfile, threading
    from pathlib import Path
    from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy

    root = Path(tempfile.mkdtemp())
    stop = False
    counts = []

    def spawner():
        sandbox = Sandbox(SandboxPolicy(workdir=root, tmpdir=root / "tmp"), use_bwrap=False)
        n = 0
        while not stop or n == 0:
            sandbox.popen(["/bin/true"]).wait()
            n += 1
        counts.append(n)

    threads = [threading.Thread(target=spawner) for _ in range(4)]
    for t in threads:
        t.start()
    import torch.utils.cpp_extension  # first import: setuptools, packaging, logging
    stop = True
    for t in threads:
        t.join()
    print("spawned", sum(counts))
    """
)


def test_spawning_from_threads_during_first_imports(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_AGENT_ALLOW_UNSANDBOXED": "1", "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.startswith("spawned "), proc.stdout
    assert "Exception ignored" not in proc.stderr, proc.stderr[-4000:]
    assert "release unlocked lock" not in proc.stderr


def test_no_preexec_fn_anywhere() -> None:
    """Every process we start goes through ``start_new_session`` and the launcher instead."""
    src = Path(__file__).resolve().parents[2] / "src" / "cuda_agent"
    offenders = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if "preexec_fn=" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
