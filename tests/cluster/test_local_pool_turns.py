"""LocalPool with two jobs per device: workers take turns, and a run-time compile is off-turn."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from cuda_agent.cluster.local import LocalPool
from cuda_agent.cluster.pool import EvalJob
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import TEST_OPS_CPP, TEST_OPS_FUNCTIONS, fast_options, relu_solution

pytestmark = pytest.mark.slow  # pools of workers

# the source is not a compile-time constant, so the extension is built inside the worker;
# TOKEN makes it new to the build cache, so it is compiled there
RUN_TIME_BUILD = f"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r'''{TEST_OPS_CPP}'''.replace("@unused@", "") + "// TOKEN"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ops = load_inline(name="ca_test_ops", cpp_sources=SOURCE,
                               functions={TEST_OPS_FUNCTIONS!r})

    def forward(self, x):
        return self.ops.relu_ok(x)
"""


def test_two_jobs_share_a_device_and_compile_off_turn(tmp_path: Path) -> None:
    built_at_run_time = tmp_path / "run_time.py"
    built_at_run_time.write_text(RUN_TIME_BUILD.replace("TOKEN", secrets.token_hex(8)))
    built_ahead = relu_solution(tmp_path, "return ops.relu_ok(x)", name="ahead.py")
    problem = resolve_problem("relu", "small")
    with LocalPool("cpu", devices=["cpu0"], jobs_per_device=2) as pool:
        futures = [
            pool.submit(EvalJob(problem, load_solution(path), fast_options()))
            for path in (built_at_run_time, built_ahead)
        ]
        results = [f.result(timeout=900) for f in futures]
        # waiting for the other job's turn never times a job out: its timeouts grow; the
        # device budget does not (its clock stands while the worker waits for its turn)
        longer = pool._shared_deadlines(fast_options())
        assert longer.worker_timeout_s == 2 * fast_options().worker_timeout_s
        assert longer.device_budget == fast_options().device_budget
    run_time, ahead = results
    assert run_time.correct and ahead.correct, (run_time.error, ahead.error)
    assert run_time.builds, "the extension was not built inside the worker"
    assert run_time.record.device_turns_given_up == 1
    assert ahead.record is not None and ahead.record.device_turns_given_up is None
    assert {r.details.pool_device for r in results} == {"cpu0"}
    # both verified under the device's shared turn (worker/device_turn.py)
    assert all("wait_shared" in ((r.record and r.record.worker_phases_s) or {}) for r in results)
    # and, nothing of theirs left running, each timed with the device alone
    assert not any(
        "timed_beside_other_jobs" in (r.record.notes if r.record else []) for r in results
    )


def test_one_job_per_device_by_default_never_gives_a_turn_up(tmp_path: Path) -> None:
    path = tmp_path / "run_time.py"
    path.write_text(RUN_TIME_BUILD.replace("TOKEN", secrets.token_hex(8)))
    with LocalPool("cpu", devices=["cpu0"]) as pool:
        result = pool.submit(
            EvalJob(resolve_problem("relu", "small"), load_solution(path), fast_options())
        ).result(timeout=900)
        assert pool._shared_deadlines(fast_options()) == fast_options()
    assert result.correct, result.error
    assert result.record is not None and result.record.device_turns_given_up is None
