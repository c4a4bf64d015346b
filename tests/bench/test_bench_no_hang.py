"""Regression: ``bench run`` over many single-file ``load_inline`` solutions never hangs.

A bench over 227 LLM-written solutions once wrote nothing for 9 minutes: a build thread was
importing ``torch.utils.cpp_extension`` for the first time (setuptools -> logging) while another
thread started a worker with ``preexec_fn``; the fork handlers and the import lock deadlocked.
This runs the same shape on the cpu backend, in a fresh process (cold imports) with a cold
cache: half the solutions build at import (built by the pool's build threads first), half call
``load_inline`` inside ``__init__`` (nothing to pre-build: their workers start at once, while
the first builds are still importing), with 4 build threads, 3 workers and 3 spare workers.
The hazard is at the start (first imports, first build, first worker starts), so the count is
the fewest that keeps all of those busy at once there: 12 solutions, 6 of each kind. The
at-import half alone is more than the build threads; the in-``__init__`` half alone is as many
as the workers plus their spares, enough evaluations to take every worker and every spare while
the first build still imports and compiles. (It was 40: every solution after those met warm
imports and the already built extension, and repeated the same work.) A watchdog fails the test
when no result arrives for a while, with every thread's stack (SIGABRT with
``PYTHONFAULTHANDLER``) in the message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BUILD_WORKERS, WORKERS, SPARE_WORKERS = 4, 3, 3
# half of them (the in-__init__ ones) fill every worker and spare; the other half are more
# than the build threads
SOLUTIONS = 2 * (WORKERS + SPARE_WORKERS)
assert SOLUTIONS // 2 > BUILD_WORKERS
STALL_S = 240.0  # no new result for this long: hung (a healthy run gives one every few s)
TOTAL_S = 1500.0

PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, {width})]


def get_init_inputs():
    return []
"""

CPP = r"""
torch::Tensor relu(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}
"""

AT_IMPORT = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ops = load_inline("hang_relu", cpp_sources=r"""{CPP}""", functions=["relu"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.relu(x)
'''

IN_INIT = f'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ops = load_inline("hang_relu", cpp_sources=r"""{CPP}""", functions=["relu"])

    def forward(self, x):
        return self.ops.relu(x)
'''


def _corpus(root: Path) -> tuple[Path, Path]:
    problems, solutions = root / "problems", root / "solutions"
    problems.mkdir()
    solutions.mkdir()
    for k in range(SOLUTIONS):
        pid = f"p{k:02d}"
        (problems / f"{pid}.py").write_text(PROBLEM.format(width=64 + k))
        (solutions / f"{pid}.py").write_text(AT_IMPORT if k % 2 == 0 else IN_INIT)
    return problems, solutions


def _results(run: Path) -> int:
    path = run / "results.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_bench_of_many_load_inline_solutions_never_hangs(tmp_path: Path) -> None:
    problems, solutions = _corpus(tmp_path)
    run = tmp_path / "run"
    log = tmp_path / "bench.log"
    cache = tmp_path / "cache"  # cold: the first builds import torch's build code
    env = {
        **os.environ,
        "CUDA_AGENT_CACHE": str(cache),
        "CUDA_AGENT_PROGRESS": "plain",
        "CUDA_AGENT_PROGRESS_INTERVAL": "10",
        "PYTHONFAULTHANDLER": "1",  # SIGABRT prints every thread's stack
    }
    argv = [sys.executable, "-m", "cuda_agent", "bench", "run", "--problems", str(problems)]
    argv += ["--solutions", str(solutions), "--backend", "cpu", "--baselines", ""]
    argv += ["--policy", "off", "--workers", str(WORKERS), "--build-workers", str(BUILD_WORKERS)]
    argv += ["--spare-workers", str(SPARE_WORKERS), "--out", str(run)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            _watch(proc, run, log)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    text = log.read_text()
    assert proc.returncode == 0, text[-4000:]
    assert _results(run) == SOLUTIONS
    finished = [line for line in text.splitlines() if line.startswith("[") and ": " in line]
    assert sum(1 for line in finished if ": correct" in line) == SOLUTIONS, text[-4000:]
    assert "done " in text and "queued" in text  # the periodic summary lines


def _watch(proc: subprocess.Popen[bytes], run: Path, log: Path) -> None:
    start = last_change = time.monotonic()
    seen = 0
    while proc.poll() is None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # back at once when the run ends
        now = time.monotonic()
        count = _results(run)
        if count != seen:
            seen, last_change = count, now
        if now - last_change > STALL_S or now - start > TOTAL_S:
            os.kill(proc.pid, signal.SIGABRT)  # every thread's stack into the log, then exit
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            pytest.fail(
                f"bench run hung: {seen}/{SOLUTIONS} results, none for {now - last_change:.0f} s; "
                f"its log and thread stacks:\n{log.read_text()[-12000:]}"
            )
