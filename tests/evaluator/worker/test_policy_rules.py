"""What each policy decides (names.rules) and the global-switch snapshot that tolerates some."""

from __future__ import annotations

import pytest
import torch

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.policy import POLICIES
from cuda_agent.evaluator.worker.guards import GlobalState
from cuda_agent.evaluator.worker.policies import rules


def test_strict_is_the_papers_rules() -> None:
    strict = rules("strict")
    assert strict.op_policy and strict.custom_kernel_required and strict.strict_weights
    assert strict.compile_disabled and not strict.tolerated_switches and not strict.weight_probe
    assert strict.min_custom_kernel_coverage == 0.0  # the op rule leaves nothing to hide behind


def test_kernelbench_is_kernelbench_acceptance_plus_our_checks() -> None:
    kb = rules("kernelbench")
    assert not kb.op_policy and not kb.strict_weights and not kb.compile_disabled
    assert kb.custom_kernel_required and kb.weight_probe
    assert kb.tolerated_switches == {"cudnn_benchmark"}
    assert kb.min_custom_kernel_coverage == 0.01  # own kernels: >= 1% of the device time


def test_off_drops_the_kernel_requirement_only() -> None:
    off, kb = rules("off"), rules("kernelbench")
    assert not off.custom_kernel_required and off.min_custom_kernel_coverage == 0.0
    assert (off.strict_weights, off.weight_probe, off.tolerated_switches) == (
        kb.strict_weights,
        kb.weight_probe,
        kb.tolerated_switches,
    )


def test_every_policy_has_rules_and_unknown_ones_fail() -> None:
    for name in POLICIES:
        rules(name)
    with pytest.raises(ConfigError, match="unknown policy 'lenient'"):
        rules("lenient")


@pytest.fixture
def pinned_switches():
    saved = (torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32 = saved


def test_a_tolerated_switch_is_restored_and_remembered_not_flagged(pinned_switches: None) -> None:
    state = GlobalState(frozenset({"cudnn_benchmark"}))
    torch.backends.cudnn.benchmark = True
    assert state.changed() == []
    assert torch.backends.cudnn.benchmark is False
    assert state.tolerated_seen == {"cudnn_benchmark"}


def test_other_switches_stay_flagged_beside_a_tolerated_one(pinned_switches: None) -> None:
    state = GlobalState(frozenset({"cudnn_benchmark"}))
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    assert state.changed() == ["cudnn_tf32"]
    assert state.tolerated_seen == {"cudnn_benchmark"}


def test_without_tolerance_the_switch_is_flagged(pinned_switches: None) -> None:
    state = GlobalState()
    torch.backends.cudnn.benchmark = True
    assert state.changed() == ["cudnn_benchmark"]
    assert state.tolerated_seen == set()
