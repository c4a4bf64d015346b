"""Verdicts on a GPU that another process uses (``pytest -m gpu``; issue 48 item 2).

A foreign process (a plain torch script, not ours: it takes no device turn) runs beside the
evaluation:
* ``compute``: matrix products back to back and a 1 GiB allocation freed each round. Honest
  candidates (one stream; a side stream joined back) stay correct, with no
  ``work_outside_timed_stream`` (the stream check looks twice before it blames), and the
  side stream that escapes is still rejected under the same load;
* ``hold``: all of the device's free memory but 2 GiB held. A problem whose input needs 4 GiB
  then fails at stage ``internal`` with ``device_memory_contention`` and the count of what other
  processes held, never as the candidate's failure.

The foreign process is checked to be alive and busy through every evaluation (it reports its
rounds when its stdin closes). These tests take the whole device's memory or time: the GPU
recipe runs this file on its own, after the parallel run (benchmarks/recipes/gpu_tests.sh).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.gpu.test_cuda_pipeline import run, workdir
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

FOREIGN = r"""
import sys, threading, torch
mode, leave_gib = sys.argv[1], float(sys.argv[2])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
held = None
if mode == "hold":
    free, _ = torch.cuda.mem_get_info()
    held = torch.empty(int(free - leave_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
b = torch.randn(4096, 4096, device="cuda")
print("ready", flush=True)
rounds = 0
while not stop.is_set():
    if mode == "compute":
        for _ in range(8):
            c = a @ b
        scratch = torch.empty(1 << 28, device="cuda")
        del scratch
        torch.cuda.synchronize()
        rounds += 1
    else:
        stop.wait(0.5)
        rounds += 1
print("rounds", rounds, flush=True)
"""

BIG_RELU_PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1 << 30)]  # 4 GiB


def get_init_inputs():
    return []
"""

TORCH_RELU = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n"
)


@contextmanager
def foreign_process(mode: str, leave_gib: float = 0.0) -> Iterator[subprocess.Popen[str]]:
    """The foreign load, started and ready; on leaving, it must still have been running."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FOREIGN, mode, str(leave_gib)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "ready", "the foreign load did not start"
        yield proc
        assert proc.poll() is None, "the foreign load ended before the evaluation did"
    finally:
        proc.stdin.close()
        last = proc.stdout.read()
        proc.wait(timeout=120)
    rounds = int(last.split()[-1]) if last.split() else 0
    assert rounds > 0, f"the foreign load did no work: {last!r}"


@pytest.mark.parametrize("launcher", ["relu_launch", "relu_joined"])
def test_honest_candidates_stay_correct_beside_a_foreign_load(
    tmp_path: Path, launcher: str
) -> None:
    solution = workdir(tmp_path, launcher)
    with foreign_process("compute"):
        results = [run(solution, size="standard") for _ in range(3)]
    for result in results:
        assert result.correct, (result.flags, result.error)
        assert "work_outside_timed_stream" not in result.flags


def test_escaped_work_is_still_rejected_beside_a_foreign_load(tmp_path: Path) -> None:
    with foreign_process("compute"):
        result = run(workdir(tmp_path, "relu_escape"), size="standard")
    assert "work_outside_timed_stream" in result.flags, (result.flags, result.error)
    assert "stream_check_second_look" in (result.record.timing or {})


def test_memory_held_by_another_process_is_named(tmp_path: Path) -> None:
    problem = tmp_path / "big_relu.py"
    problem.write_text(BIG_RELU_PROBLEM)
    solution = tmp_path / "torch_relu.py"
    solution.write_text(TORCH_RELU)
    opts = fast_options(backend="cuda", policy="off")
    with foreign_process("hold", leave_gib=2.0):
        result = evaluate(resolve_problem(str(problem), "standard"), load_solution(solution), opts)
    assert result.error is not None and result.error.stage == "internal", result.error
    assert "device_memory_contention" in result.flags, (result.flags, result.error)
    assert "other processes about" in result.error.message
    assert "forward_raised" not in result.flags
