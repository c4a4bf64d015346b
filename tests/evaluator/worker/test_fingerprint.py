import os

import pytest
import torch

from cuda_agent.evaluator.worker import tensors
from cuda_agent.evaluator.worker.tensors import fingerprint, fingerprint_nested

DTYPES = (
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.complex64,
)


@pytest.mark.parametrize("dtype", DTYPES)
def test_any_single_element_change_is_seen_in_any_chunk(monkeypatch, dtype) -> None:
    monkeypatch.setattr(tensors, "FINGERPRINT_CHUNK", 37)
    monkeypatch.setattr(tensors, "_ramps", {})
    # seeded: a bfloat16 element at 256 or more has a spacing of 2, where + 1 can round back
    base = (torch.randn(200, generator=torch.Generator().manual_seed(0)) * 50).to(dtype)
    reference = fingerprint(base)
    assert fingerprint(base.clone()) == reference
    for index in (0, 36, 37, 150, 199):  # chunk edges and the short last chunk
        changed = base.clone()
        changed[index] = changed[index] + 1
        assert fingerprint(changed) != reference, index


def test_order_shape_and_dtype_matter() -> None:
    values = torch.arange(1000, dtype=torch.float32)
    assert fingerprint(values) != fingerprint(values.flip(0))  # same plain sum, other order
    assert fingerprint(values) != fingerprint(values.view(10, 100))
    assert fingerprint(values) != fingerprint(values.view(torch.int32))


def test_booleans_empty_tensors_and_nests() -> None:
    flags = torch.rand(64) > 0.5
    flipped = flags.clone()
    flipped[5] = ~flipped[5]
    assert fingerprint(flags) != fingerprint(flipped)
    nest = [torch.ones(3), (torch.empty(0), {"k": torch.zeros(2, dtype=torch.int64)}), 7]
    prints = fingerprint_nested(nest)
    assert len(prints) == 3 and prints == fingerprint_nested(nest)
    assert prints[1][-2:] == (0, 0)
    assert fingerprint_nested([]) == []


def test_weights_are_secret_per_process() -> None:
    """The weighted sum's weights are drawn from a secret seed, all odd (no element is blind)."""
    ramp = tensors._ramp(torch.device("cpu"), torch.int32, tensors.FINGERPRINT_CHUNK)
    assert bool((ramp % 2 != 0).all()) and ramp.numel() == tensors.FINGERPRINT_CHUNK


def test_the_ramp_grows_to_the_longest_tensor_and_keeps_its_weights(monkeypatch) -> None:
    """Weights are drawn only as far as a tensor needs; a ramp that grows later keeps the
    weights it had, so a fingerprint taken before the growth still matches after it."""
    monkeypatch.setattr(tensors, "_ramps", {})
    cpu = torch.device("cpu")
    values = torch.arange(100, dtype=torch.float32)
    before = fingerprint(values)
    short = tensors._ramp(cpu, torch.int32, 100).clone()
    assert short.numel() == tensors.RAMP_BLOCK  # one block, not the chunk's 16 million
    long = tensors._ramp(cpu, torch.int32, 3 * tensors.RAMP_BLOCK + 5)
    assert long.numel() == 4 * tensors.RAMP_BLOCK
    assert torch.equal(long[: short.numel()], short)
    assert not torch.equal(
        long[: tensors.RAMP_BLOCK], long[tensors.RAMP_BLOCK : 2 * tensors.RAMP_BLOCK]
    )
    assert fingerprint(values) == before
    assert tensors._ramp(cpu, torch.int32, 10 * tensors.FINGERPRINT_CHUNK).numel() == (
        tensors.FINGERPRINT_CHUNK
    )


def test_a_forked_process_draws_its_own_weights(monkeypatch) -> None:
    """The worker template forks every worker: a child (another process id) must not reuse
    weights its parent drew, or one worker's fingerprints would tell another's. (A real fork
    of a process that has run torch's CPU ops can hang in the child; the process id is what
    the ramp keys its secret on.)"""
    cpu = torch.device("cpu")
    parent = tensors._ramp(cpu, torch.int64, 8)[:8].tolist()
    real_pid = os.getpid()
    monkeypatch.setattr(tensors.os, "getpid", lambda: real_pid + 1)
    child = tensors._ramp(cpu, torch.int64, 8)[:8].tolist()
    assert child != parent
    assert tensors._ramp(cpu, torch.int64, 8)[:8].tolist() == child  # kept in the child
