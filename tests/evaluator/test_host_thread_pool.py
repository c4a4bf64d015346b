"""Threads the harness starts must not be counted as the candidate's.

On the H200 (2026-11-30, night) every cudnn.benchmark conv solution of CUDA-L1's h20 set that
reached the thread check was rejected ``threads_started`` with exactly cores - 1 new threads
after trial 1. The cause was ours: after a call that flipped a tolerated switch, the harness set
*every* switch back, ``torch.set_num_threads`` included, and that call starts torch's intra-op
pool (``num_threads - 1`` threads) in a process that had none. Now only the switches that
differ are set back, and the worker's device starts the pool before anything is counted (a
candidate's own first parallel CPU op would start it too). A thread the candidate starts itself
is still caught (``tests/adversarial``: ``b2_thread_writes_later``).

Each check runs in a fresh interpreter with torch's default thread count, as a GPU worker has.
"""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # fresh torch processes

PROBE = """
import torch
from cuda_agent.evaluator.worker.census import thread_count
from cuda_agent.evaluator.worker.device import start_intra_op_pool
if {start}:
    start_intra_op_pool()
before = thread_count()
torch.ones(1 << 22).add_(1.0)  # a candidate's parallel CPU op
print(torch.get_num_threads(), thread_count() - before)
"""


RESTORE = """
import torch
from cuda_agent.evaluator.worker.census import thread_count
from cuda_agent.evaluator.worker.guards import GlobalState
state = GlobalState(frozenset({"cudnn_benchmark"}))
before = thread_count()
torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark  # what ModelNew did
assert state.changed() == [] and state.tolerated_seen == {"cudnn_benchmark"}
assert torch.backends.cudnn.benchmark == state.values["cudnn_benchmark"]  # set back
print(torch.get_num_threads(), thread_count() - before)
"""


def _run(code: str) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # conftest's 1
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    threads, new = proc.stdout.split()
    return int(threads), int(new)


def test_the_pool_exists_before_the_candidates_first_parallel_op() -> None:
    threads, new_without = _run(PROBE.format(start=False))
    if threads < 2:
        pytest.skip("one intra-op thread here: torch starts no pool")
    assert new_without == threads - 1  # the pool, counted as new threads
    assert _run(PROBE.format(start=True)) == (threads, 0)


def test_setting_a_tolerated_switch_back_starts_no_thread() -> None:
    threads, new = _run(RESTORE)
    if threads < 2:
        pytest.skip("one intra-op thread here: torch starts no pool")
    assert new == 0  # the old restore() called set_num_threads: threads - 1 new threads
