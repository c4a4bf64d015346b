"""The GPU kernel record's verdict (``verify.kernel_check``) follows the policy table's
``min_custom_kernel_coverage``: own kernels below 1% of the device time are
``custom_kernels_idle`` under ``kernelbench`` only. No GPU needed: the profiled call is
replaced by the activities the profiler would report."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from cuda_agent.core.policy import POLICIES
from cuda_agent.core.records import EvaluationRecord
from cuda_agent.evaluator.worker import verify
from cuda_agent.evaluator.worker.kernels import DeviceActivity
from cuda_agent.evaluator.worker.policies import rules
from cuda_agent.evaluator.worker.session import Verdict

TORCH_KERNEL = "void at::native::vectorized_elementwise_kernel<4>(int)"


def session(policy: str) -> Any:
    """The parts of an ``EvaluationSession`` the kernel check reads."""
    return SimpleNamespace(
        req=SimpleNamespace(settings=SimpleNamespace(policy=policy)),
        rules=rules(policy),
        ref=SimpleNamespace(verify_sets=[[torch.ones(4)]]),
        cand=torch.nn.Identity(),
        shim=SimpleNamespace(module_paths=[], triton=SimpleNamespace(kernel_names={"own"})),
        result=EvaluationRecord(),
    )


def record(monkeypatch: pytest.MonkeyPatch, own_us: float, torch_us: float) -> None:
    kernels = [
        DeviceActivity(TORCH_KERNEL, 7, 0.0, torch_us, is_kernel=True),
        DeviceActivity("own", 7, torch_us, own_us, is_kernel=True),
    ]
    monkeypatch.setattr(verify, "profile_call", lambda fn: kernels)


@pytest.mark.parametrize("policy", POLICIES)
def test_idle_own_kernels_fail_under_kernelbench_only(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(monkeypatch, own_us=0.5, torch_us=99.5)  # 0.5% of the device time
    s = session(policy)
    if policy == "kernelbench":
        with pytest.raises(Verdict) as raised:
            verify.kernel_check(s)
        assert raised.value.flags == ["custom_kernels_idle"]
        assert str(raised.value).startswith("policy kernelbench: your own kernels took 0.5%")
    else:
        verify.kernel_check(s)
    assert s.result.kernels["custom_kernels"] == 1


@pytest.mark.parametrize("policy", POLICIES)
def test_own_kernels_doing_real_work_pass_every_policy(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    record(monkeypatch, own_us=5.0, torch_us=95.0)
    s = session(policy)
    verify.kernel_check(s)
    assert s.result.kernels["coverage"] == 0.05
