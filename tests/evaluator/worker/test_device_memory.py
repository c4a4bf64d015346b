"""Whose fault a GPU out-of-memory error is (``evaluator/worker/device_memory.py``): the count's
arithmetic and the error's reading. On the GPU, tests/gpu/test_shared_gpu.py holds most of the
device from another process and checks the verdict's name."""

from __future__ import annotations

import torch

from cuda_agent.evaluator.worker.device_memory import (
    OWN_ALLOWANCE_BYTES,
    DeviceMemory,
    device_memory,
    is_device_oom,
    oom_census,
    requested_bytes,
)

GIB = 1 << 30
TORCH_OOM = (
    "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 1.95 GiB is free."
)


def test_an_oom_is_recognised_and_its_request_read() -> None:
    assert is_device_oom(torch.OutOfMemoryError(TORCH_OOM))
    assert is_device_oom(RuntimeError("CUDA error: out of memory"))
    assert not is_device_oom(RuntimeError("shape mismatch"))
    assert requested_bytes(RuntimeError(TORCH_OOM)) == 4 * GIB
    assert requested_bytes(RuntimeError("Tried to allocate 512.00 MiB")) == 512 << 20
    assert requested_bytes(RuntimeError("CUDA error: out of memory")) is None


def test_others_are_what_neither_our_tensors_nor_our_allowance_explain() -> None:
    neighbours = DeviceMemory(total=140 * GIB, free=2 * GIB, ours=10 * GIB, requested=4 * GIB)
    assert neighbours.others == 128 * GIB - OWN_ALLOWANCE_BYTES
    assert neighbours.contended
    assert "other processes about 126.0 GiB" in neighbours.text()
    alone = DeviceMemory(total=140 * GIB, free=2 * GIB, ours=137 * GIB, requested=4 * GIB)
    assert alone.others == 0 and not alone.contended
    # a request larger than the device could ever give is the candidate's, neighbours or not
    huge = DeviceMemory(total=140 * GIB, free=2 * GIB, ours=0, requested=256 << 40)
    assert not huge.contended


def test_no_census_without_cuda_or_for_other_errors() -> None:
    if not torch.cuda.is_available():
        assert device_memory() is None
        assert oom_census(torch.OutOfMemoryError(TORCH_OOM)) is None
    assert oom_census(ValueError("not memory")) is None
