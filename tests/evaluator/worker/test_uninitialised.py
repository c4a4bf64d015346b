"""uninitialised_memory_filled: NaN in fresh ``empty`` tensors inside the block, torch's
deterministic settings as they were after it (also when the block raises)."""

from __future__ import annotations

import pytest
import torch
import torch.utils.deterministic as deterministic

from cuda_agent.evaluator.worker.uninitialised import uninitialised_memory_filled


def _settings() -> tuple[bool, bool, bool]:
    return (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        bool(deterministic.fill_uninitialized_memory),  # type: ignore[attr-defined]
    )


def test_fresh_empty_tensors_hold_nan_inside_the_block_only() -> None:
    before = _settings()
    with uninitialised_memory_filled():
        assert torch.empty(1000).isnan().all()
        assert (torch.empty(10, dtype=torch.int32) == torch.iinfo(torch.int32).max).all()
        assert _settings() == (True, True, True)
    assert _settings() == before


def test_settings_are_restored_when_the_block_raises() -> None:
    before = _settings()
    with pytest.raises(RuntimeError, match="candidate"), uninitialised_memory_filled():
        raise RuntimeError("candidate failed")
    assert _settings() == before
