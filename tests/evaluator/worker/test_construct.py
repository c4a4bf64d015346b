"""Building modules as KernelBench does (seeded, on the host), and on the device when large.

The cuda device's factory context is stood in for by ``torch.device("meta")``, under which any
constructor that reads a value (``.item()``) fails, as some fail under a cuda context, and
whose tensors hold no values (so a module used as built there would show it).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
import torch
from torch import nn

from cuda_agent.evaluator.worker import construct
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


class LegacyLinear(nn.Module):
    """Parameters made with the legacy ``torch.Tensor(shape)`` constructor (always on the host)
    and initialised exactly as ``nn.Linear.reset_parameters`` does: KernelBench gives it
    nn.Linear's weights when both are built on the host from one seed."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.Tensor(n_out, n_in))
        self.bias = nn.Parameter(torch.Tensor(n_out))
        nn.init.kaiming_uniform_(self.weight, a=5**0.5)
        bound = 1 / n_in**0.5
        nn.init.uniform_(self.bias, -bound, bound)


def test_a_small_module_is_built_again_on_the_host_as_kernelbench_builds_it() -> None:
    model, on_host = build_on_device(nn.Linear, [8, 4], 7, MetaFirstDevice())
    torch.manual_seed(7)
    expected = nn.Linear(8, 4)
    assert on_host
    assert model.weight.device.type == "cpu"  # not the meta-device build
    assert torch.equal(model.weight, expected.weight)


def test_parameters_made_on_the_host_get_the_weights_of_the_module_they_imitate() -> None:
    reference, ref_on_host = build_on_device(nn.Linear, [16, 8], 3, MetaFirstDevice())
    candidate, _ = build_on_device(LegacyLinear, [16, 8], 3, MetaFirstDevice(), ref_on_host)
    assert torch.equal(candidate.weight, reference.weight)
    assert torch.equal(candidate.bias, reference.bias)


def test_a_module_larger_than_the_host_limit_keeps_its_device_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class MetaDevice(MetaFirstDevice):  # modules built in its context are already in place
        def __init__(self) -> None:
            super().__init__()
            self.torch_device = torch.device("meta")

    monkeypatch.setattr(construct, "HOST_BUILD_MAX_ELEMENTS", 10)
    model, on_host = build_on_device(nn.Linear, [8, 4], 7, MetaDevice())
    assert not on_host
    assert model.weight.device.type == "meta"
