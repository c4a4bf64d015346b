"""How Model's weights reach ModelNew per policy, and the plan of the perturbed-weights probe.

Real modules built from the same seed, as the worker builds them (``construct.build_on_device``
on the cpu device): keys and shapes match, keys differ, shapes differ; strict and not.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import CpuDevice
from cuda_agent.evaluator.worker.weights import (
    WeightsMismatch,
    perturbed,
    probe_pairs,
    transfer,
)

SEED = 1234


class Reference(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.ln = nn.LayerNorm(n)


class SameNames(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.ln = nn.LayerNorm(n)


class Renamed(nn.Module):
    """Same parameters in the same order, other names."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.gamma = nn.Parameter(torch.ones(n))
        self.beta = nn.Parameter(torch.zeros(n))


class Reshaped(nn.Module):
    """Same names, but the norm's weight and bias are scalars."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.proj = nn.Linear(n, n)
        self.ln = nn.Module()
        self.ln.weight = nn.Parameter(torch.ones(1))
        self.ln.bias = nn.Parameter(torch.zeros(1))


class ExtraBuffer(SameNames):
    """Same parameters plus a buffer derived from them at construction."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.register_buffer("proj_t", self.proj.weight.detach().t().contiguous())


class PlainAttributeCopy(SameNames):
    """Same state_dict, plus copies of a weight outside it: a plain attribute and a
    non-persistent buffer (no load_state_dict would update them)."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.cache = [self.proj.weight.detach().clone()]
        self.register_buffer("proj_t", self.proj.weight.detach().t(), persistent=False)


def built(cls: type, n: int = 8) -> nn.Module:
    model, on_host = build_on_device(cls, [n], SEED, CpuDevice())
    assert not on_host
    return model


def reference_state() -> tuple[nn.Module, dict[str, torch.Tensor]]:
    ref = built(Reference)
    with torch.no_grad():  # trained-looking weights: not what a seeded construction gives
        ref.ln.weight.uniform_(0.5, 1.5)
        ref.proj.bias.add_(1.0)
    return ref, {k: v.detach().clone() for k, v in ref.state_dict().items()}


@pytest.mark.parametrize("strict", [True, False])
def test_matching_keys_and_shapes_receive_the_reference_weights(strict: bool) -> None:
    _, state = reference_state()
    cand = built(SameNames)
    outcome = transfer(cand, state, strict=strict)
    assert outcome.transferred and outcome.note is None
    for key, value in cand.state_dict().items():
        assert torch.equal(value, state[key])


def test_strict_rejects_other_names() -> None:
    _, state = reference_state()
    with pytest.raises(WeightsMismatch, match="Missing key"):
        transfer(built(Renamed), state, strict=True)


def test_strict_rejects_other_shapes() -> None:
    _, state = reference_state()
    with pytest.raises(WeightsMismatch, match="size mismatch"):
        transfer(built(Reshaped), state, strict=True)


def test_other_names_keep_the_seeded_construction_and_say_why() -> None:
    _, state = reference_state()
    cand = built(Renamed)
    before = {k: v.clone() for k, v in cand.state_dict().items()}
    outcome = transfer(cand, state, strict=False)
    assert not outcome.transferred
    assert outcome.note == (
        "Model's keys missing: proj.weight, proj.bias, ln.weight, ln.bias; "
        "extra keys: gamma, beta, fc.weight, fc.bias"
    )
    after = cand.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    # the seeded construction is KernelBench's: the same values as Model(...) from that seed
    assert torch.equal(after["fc.weight"], built(Reference).proj.weight)


def test_other_shapes_keep_the_seeded_construction_and_say_why() -> None:
    _, state = reference_state()
    cand = built(Reshaped)
    outcome = transfer(cand, state, strict=False)
    assert not outcome.transferred
    assert outcome.note == "shapes differ: ln.weight (1,) vs (8,), ln.bias (1,) vs (8,)"
    assert torch.equal(cand.ln.weight, torch.ones(1))


def test_extra_buffer_is_an_extra_key() -> None:
    _, state = reference_state()
    outcome = transfer(built(ExtraBuffer), state, strict=False)
    assert not outcome.transferred and outcome.note == "extra keys: proj_t"


def test_probe_pairs_by_name_after_a_transfer() -> None:
    ref = built(Reference)
    cand = built(SameNames)
    assert transfer(cand, ref.state_dict(), strict=False).transferred
    pairs, reason = probe_pairs(ref, cand, transferred=True)
    assert reason is None
    assert [name for name, _, _ in pairs] == ["proj.weight", "proj.bias", "ln.weight", "ln.bias"]
    assert all(c is dict(cand.named_parameters())[n] for n, _, c in pairs)


def test_probe_pairs_renamed_parameters_by_shape_and_initial_value() -> None:
    ref, cand = built(Reference), built(Renamed)
    pairs, reason = probe_pairs(ref, cand, transferred=False)
    assert reason is None
    by_name = {n: c for n, _, c in pairs}
    assert by_name["proj.weight"] is cand.fc.weight and by_name["ln.bias"] is cand.beta


def test_probe_is_skipped_without_a_one_to_one_correspondence() -> None:
    pairs, reason = probe_pairs(built(Reference), built(Reshaped), transferred=False)
    assert pairs == [] and reason == "ModelNew's parameters do not correspond one to one to Model's"


def test_probe_is_skipped_when_modelnew_saves_buffers_that_model_does_not() -> None:
    pairs, reason = probe_pairs(built(Reference), built(ExtraBuffer), transferred=False)
    assert pairs == [] and reason == "ModelNew holds buffers that Model does not (proj_t)"


def test_copies_outside_the_state_dict_do_not_stop_the_probe() -> None:
    ref, cand = built(Reference), built(PlainAttributeCopy)
    assert transfer(cand, ref.state_dict(), strict=False).transferred
    pairs, reason = probe_pairs(ref, cand, transferred=True)
    assert reason is None and len(pairs) == 4


def test_nothing_to_probe_without_learnable_parameters() -> None:
    assert probe_pairs(nn.ReLU(), nn.ReLU(), transferred=True) == ([], None)


def test_perturbed_constants_move_and_varied_tensors_are_reshuffled() -> None:
    gen = torch.Generator().manual_seed(5)
    ones, zeros = perturbed(torch.ones(1000), gen), perturbed(torch.zeros(1000), gen)
    assert (ones - 1).abs().max() > 0.2 and ones.min() >= 0.75 and ones.max() <= 1.25
    assert zeros.abs().max() > 0.2 and zeros.abs().max() <= 0.25
    scalar = perturbed(torch.tensor([3.0]), gen)
    assert scalar.shape == (1,) and 0.0 < abs(float(scalar) - 3.0) <= 0.75
    weight = torch.randn(64, 32)
    shuffled = perturbed(weight, gen)
    assert shuffled.shape == weight.shape and not torch.equal(shuffled, weight)
    assert torch.equal(shuffled.flatten().sort().values, weight.flatten().sort().values)
    again = perturbed(weight, torch.Generator().manual_seed(5))
    assert torch.equal(again, perturbed(weight, torch.Generator().manual_seed(5)))
    assert perturbed(torch.ones(4, dtype=torch.float16), gen).dtype == torch.float16
