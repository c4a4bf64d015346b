"""Building modules on the device, and the host fallback for constructors that cannot run there.

The cuda device's factory context is stood in for by ``torch.device("meta")``, under which any
constructor that reads a value (``.item()``) fails, as some fail under a cuda context.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
import torch
from torch import nn

from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import CpuDevice


class MetaFirstDevice(CpuDevice):
    """A host device whose factory context makes tensors on ``meta``."""

    name = "meta-first"

    def factory_context(self) -> AbstractContextManager[Any]:
        return torch.device("meta")


class ReadsAValue(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.scale = float(torch.rand(()).item()) + 1.0


def test_a_plain_constructor_is_built_in_the_factory_context_and_seeded() -> None:
    model, on_host = build_on_device(nn.Linear, [8, 4], 7, CpuDevice())
    torch.manual_seed(7)
    expected = nn.Linear(8, 4)
    assert not on_host
    assert torch.equal(model.weight, expected.weight)


def test_a_constructor_that_fails_in_the_context_is_built_on_the_host_from_the_same_seed() -> None:
    model, on_host = build_on_device(ReadsAValue, [4], 11, MetaFirstDevice())
    torch.manual_seed(11)
    expected = ReadsAValue(4)
    assert on_host
    assert model.proj.weight.device.type == "cpu"
    assert torch.equal(model.proj.weight, expected.proj.weight)
    assert model.scale == expected.scale


def test_a_constructor_that_fails_on_the_host_too_raises_its_own_error() -> None:
    class Broken(nn.Module):
        def __init__(self) -> None:
            raise ValueError("bad init")

    with pytest.raises(ValueError, match="bad init"):
        build_on_device(Broken, [], 0, MetaFirstDevice())
