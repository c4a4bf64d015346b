"""Killing a command (SIGTERM, as ``timeout`` does) kills the worker processes it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SLOW = """
import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(120)
        return x


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


LINT_ARGS = ("--backend", "cpu", "--timeout", "300")


def workers_of(cache: Path) -> list[int]:
    """Worker processes whose environment names this test's cache directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"cuda_agent.evaluator.worker" in cmdline and str(cache).encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("bubblewrap", [True, False])
def test_sigterm_kills_running_workers(tmp_path: Path, bubblewrap: bool) -> None:
    """Without bubblewrap (no ``--die-with-parent``) the command itself must kill them."""
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "slow.py").write_text(SLOW)
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
        deadline = time.monotonic() + 60
        while not workers_of(cache) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert workers_of(cache), "the worker never started"
        time.sleep(3)  # the worker is inside the problem's forward now
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
        deadline = time.monotonic() + 10
        while workers_of(cache) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert workers_of(cache) == []
    finally:
        proc.kill()
        for pid in workers_of(cache):
            os.killpg(pid, signal.SIGKILL)
