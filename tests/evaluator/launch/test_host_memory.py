"""The host-memory watch and the OOM killer's count (``evaluator/launch/host_memory.py``), on real
processes: a tree's anonymous memory summed, a real evaluate worker (cpu backend, its address-
space cap off so only the watch can stop it) killed past a watched cap and the verdict naming
``memory_cap``, and a worker that dies of SIGKILL named ``host_oom`` only when the OOM killer's
count rose meanwhile.

The kernel's count cannot be made to rise here without running the host out of memory, so the
last two tests point ``host_memory.VMSTAT`` at a file in the worker's own folder, which the
candidate updates before it kills itself (as the kernel's counter would read after a real
OOM kill); everything else (the worker, its death, the reading and the naming) is the real path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator import pipeline
from cuda_agent.evaluator.launch import host_memory
from cuda_agent.evaluator.launch.host_memory import (
    MemoryWatch,
    killed_by_oom,
    oom_kills,
    tree_anonymous_bytes,
)
from cuda_agent.evaluator.launch.worker_process import WorkerOutcome
from cuda_agent.workspace.memory_cap import MEMORY_CAP_ENV
from tests.helpers import run_relu_worker

MIB = 1 << 20
HOLDER = (
    "import sys\n"
    "block = bytearray({size})\n"
    "block[::4096] = b'x' * len(block[::4096])\n"  # touch every page: resident, anonymous
    "print('held', flush=True)\n"
    "sys.stdin.read()\n"
)


def start_holder(size: int) -> subprocess.Popen[str]:
    """A shell whose child Python holds ``size`` bytes until its stdin closes."""
    code = HOLDER.format(size=size)
    proc = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" -c "$0"', code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_tree_s_memory_counts_its_children() -> None:
    proc = start_holder(300 * MIB)
    try:
        # the shell itself holds next to nothing: the child's 300 MiB are found below it
        assert tree_anonymous_bytes(proc.pid) >= 300 * MIB
        watch = MemoryWatch(proc.pid, cap_bytes=200 * MIB)
        assert watch.look() is True and watch.peak_bytes >= 300 * MIB
        assert MemoryWatch(proc.pid, cap_bytes=2000 * MIB).look() is False
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)


def test_the_oom_count_is_read_and_compared(tmp_path: Path) -> None:
    stat = tmp_path / "vmstat"
    stat.write_text("nr_free_pages 12\noom_kill 7\npgfault 3\n")
    assert oom_kills(stat) == 7
    assert oom_kills(tmp_path / "missing") is None
    assert killed_by_oom(7, 8) and not killed_by_oom(7, 7) and not killed_by_oom(None, 8)


def run_candidate(tmp_path: Path, forward: str, **kwargs: object) -> WorkerOutcome:
    """An evaluate worker (cpu) for a candidate whose forward is ``forward``'s lines."""
    body = "\n".join(f"        {line}" for line in forward.splitlines())
    candidate = (
        "import os, signal\nfrom pathlib import Path\n\nimport torch.nn as nn\n\n\n"
        f"class ModelNew(nn.Module):\n    def forward(self, x):\n{body}\n        return x\n"
    )
    return run_relu_worker(tmp_path, candidate, {"vmstat": "oom_kill 5\n"}, **kwargs)


def verdict_of(outcome: WorkerOutcome) -> tuple[list[str], str]:
    result = EvalResult(problem_id="relu", backend="cpu")
    error = pipeline._absorb_worker(result, outcome, None)
    assert error is not None
    return result.flags, error.message


@pytest.mark.slow  # starts a worker
def test_a_worker_past_its_watched_cap_is_stopped_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, "off")  # no RLIMIT_AS: only the watch can stop it
    forward = (
        "held = []\n"
        "while True:  # 64 MiB more, touched, until someone stops it\n"
        "    block = bytearray(64 << 20)\n"
        "    block[::4096] = b'x' * len(block[::4096])\n"
        "    held.append(block)"
    )
    outcome = run_candidate(tmp_path, forward, host_memory_cap=768 * MIB)
    assert outcome.memory_capped is True and outcome.record is None
    assert not outcome.timed_out and not outcome.oom_killed
    assert outcome.host_memory_peak > 768 * MIB
    assert "host-memory cap" in outcome.death_reason()
    flags, message = verdict_of(outcome)
    assert flags == ["memory_cap"], message
    assert "past its memory cap of 0.75 GiB" in message and MEMORY_CAP_ENV in message


@pytest.mark.slow  # starts a worker
@pytest.mark.parametrize("count_rises", [True, False])
def test_a_sigkill_is_named_host_oom_only_when_the_oom_count_rose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_rises: bool
) -> None:
    stat = tmp_path / "worker" / "solution" / "vmstat"
    monkeypatch.setattr(host_memory, "VMSTAT", stat)
    bump = "(Path(__file__).parent / 'vmstat').write_text('oom_kill 6\\n')\n"
    forward = (bump if count_rises else "") + "os.kill(os.getpid(), signal.SIGKILL)"
    outcome = run_candidate(tmp_path, forward)
    assert outcome.record is None and outcome.killed_by_sigkill, outcome.death_reason()
    assert outcome.oom_killed is count_rises
    flags, message = verdict_of(outcome)
    if count_rises:
        assert flags == ["host_oom"]
        assert "out-of-memory killer during verify" in message
    else:
        assert flags == ["crashed"]
        assert "was killed by SIGKILL during verify" in message
