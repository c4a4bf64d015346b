"""Killing a command (SIGTERM, as ``timeout`` does) kills the worker processes it started."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import wait_for

pytestmark = pytest.mark.slow  # a command and its workers

SLOW = """
import subprocess
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        # a child the test can see: while it runs, the worker is inside this forward
        subprocess.run(["{sleep}", "{marker}"])
        return x


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


LINT_ARGS = ("--backend", "cpu", "--timeout", "300")


def workers_of(cache: Path, marker: bytes = b"cuda_agent.evaluator.worker") -> list[int]:
    """Processes whose command line holds ``marker`` (a worker, by default) and whose
    environment names this test's cache directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in cmdline and str(cache).encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("bubblewrap", [True, False])
def test_sigterm_kills_running_workers(tmp_path: Path, bubblewrap: bool) -> None:
    """Without bubblewrap (no ``--die-with-parent``) the command itself must kill them."""
    folder = tmp_path / "set"
    folder.mkdir()
    marker = f"{600 + os.getpid() % 1000}.{int(bubblewrap)}5"  # sleep's seconds, ours alone
    sleep = shutil.which("sleep")  # by its path: without bubblewrap PATH holds only Python
    assert sleep is not None
    (folder / "slow.py").write_text(SLOW.replace("{marker}", marker).replace("{sleep}", sleep))
    cache = tmp_path / "cache"
    env = {**os.environ, "CUDA_AGENT_CACHE": str(cache)}
    if not bubblewrap:  # hide bwrap: the sandbox falls back to rlimits
        env["PATH"] = str(Path(sys.executable).parent)
    proc = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent", "problems", "lint", "--set", str(folder), *LINT_ARGS],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        inside = wait_for(lambda: workers_of(cache, f"{sleep}\0{marker}\0".encode()), proc)
        assert inside, "the worker never reached the problem's forward"
        assert workers_of(cache), "no worker runs"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == -signal.SIGTERM
        assert wait_for(
            lambda: not workers_of(cache) and not workers_of(cache, f"{sleep}\0".encode())
        ), "a worker or its child outlived the command"
    finally:
        proc.kill()
        for pid in workers_of(cache):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
