"""Shared and exclusive device turns on a GPU (``pytest -m gpu``): a job that holds a large
share of the GPU's memory works alone, and jobs side by side keep their verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cuda_agent.cluster.local import LocalPool
from cuda_agent.cluster.pool import EvalJob
from cuda_agent.core.locks import ensure_lock_files
from cuda_agent.evaluator.worker.device_turn import LARGE_FRACTION, holding
from cuda_agent.examples import example_solutions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def test_a_job_holding_a_large_share_of_memory_takes_the_device_alone(tmp_path: Path) -> None:
    lock = str(ensure_lock_files(tmp_path / "cuda-0.lock"))
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.reset_peak_memory_stats()
    with holding(lock) as turn:
        small = torch.empty(1 << 20, device="cuda")
        assert not turn.alone_if_large(torch.cuda.synchronize) and turn.mode == "shared"
        large = torch.empty(
            int(LARGE_FRACTION * total) + (1 << 20), dtype=torch.uint8, device="cuda"
        )
        assert turn.alone_if_large(torch.cuda.synchronize) and turn.mode == "exclusive"
        del small, large
    torch.cuda.empty_cache()


def test_jobs_sharing_the_gpu_keep_their_verdicts() -> None:
    ident, path = next((i, p) for i, p in example_solutions("cuda") if i == "relu")
    problem = resolve_problem(ident, "small")
    solution = load_solution(path)
    with LocalPool("cuda", jobs_per_device=3) as pool:
        options = fast_options(backend="cuda")
        futures = [pool.submit(EvalJob(problem, solution, options)) for _ in range(3)]
        results = [f.result(timeout=900) for f in futures]
    assert all(r.correct for r in results), [r.error for r in results]
    for result in results:
        phases = (result.record.worker_phases_s if result.record else None) or {}
        assert "wait_shared" in phases and "wait_exclusive" in phases, phases
        assert result.record is not None
        assert "timed_beside_other_jobs" not in result.record.notes
