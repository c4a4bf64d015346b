"""Tensor helpers for the harness: seeds, nested cloning, fingerprints, structure walks.

All functions used to judge a candidate are bound here at import time, before any candidate
code runs, so later monkey-patching of ``torch`` attributes does not change what we call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

_clone = torch.Tensor.clone
_detach = torch.Tensor.detach
_contiguous = torch.Tensor.contiguous
_view = torch.Tensor.view
_to = torch.Tensor.to
_sum = torch.sum
_arange = torch.arange
_Tensor = torch.Tensor


def derive_seed(base: int, *labels: object) -> int:
    """A 63-bit seed for one purpose (``derive_seed(s, "verify", 3)``), independent of others."""
    text = ":".join(str(x) for x in (base, *labels)).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "little") >> 1


def map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    """Apply ``fn`` to every tensor in a nest of lists, tuples and dicts."""
    if isinstance(value, _Tensor):
        return fn(value)
    if isinstance(value, list):
        return [map_tensors(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: map_tensors(v, fn) for k, v in value.items()}
    return value


def iter_tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, _Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from iter_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from iter_tensors(v)


def clone_nested(value: Any) -> Any:
    """Deep copy of every tensor (same device, same strides); other values are shared."""
    return map_tensors(value, lambda t: _clone(_detach(t)))


def fingerprint(t: torch.Tensor) -> tuple[int, ...]:
    """An exact content fingerprint: shape, dtype and two integer checksums of the raw bits.

    Computed on the tensor's device with integer arithmetic, so it is cheap on the GPU and
    free of rounding; any change of a single bit changes it (with overwhelming probability).
    """
    flat = _contiguous(_detach(t)).reshape(-1)
    if flat.dtype == torch.bool:
        flat = _to(flat, torch.uint8)
    if flat.element_size() in (4, 8, 2, 1) and flat.numel() > 0:
        int_dtype = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[
            flat.element_size()
        ]
        bits = _to(_view(flat, int_dtype), torch.int64)
        ramp = _arange(1, bits.numel() + 1, device=bits.device, dtype=torch.int64) % 1000003
        a = int(_sum(bits).item())
        b = int(_sum(bits * ramp).item())
    else:
        a = b = 0
    return (*t.shape, hash(str(t.dtype)), a, b)


def fingerprint_nested(value: Any) -> list[tuple[int, ...]]:
    return [fingerprint(t) for t in iter_tensors(value)]


def describe_shapes(value: Any) -> str:
    parts = [f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in iter_tensors(value)]
    return ", ".join(parts) if parts else "(no tensors)"
