"""Tensor helpers for the harness: seeds, nested cloning, fingerprints, structure walks.

All functions used to judge a candidate are bound here at import time, before any candidate
code runs, so later monkey-patching of ``torch`` attributes does not change what we call.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import torch

_clone = torch.Tensor.clone
_detach = torch.Tensor.detach
_contiguous = torch.Tensor.contiguous
_view = torch.Tensor.view
_to = torch.Tensor.to
_sum = torch.sum
_randint = torch.randint
_zeros = torch.zeros
_stack = torch.stack
_cat = torch.cat
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


FINGERPRINT_CHUNK = 1 << 24  # elements per weighted-sum step (bounded temporaries)
RAMP_BLOCK = 1 << 16  # weights drawn at a time, as far as the longest tensor needs
_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}
_ramps: dict[tuple[str, torch.dtype], torch.Tensor] = {}
_secret: dict[int, int] = {}  # process id -> this process's ramp seed


def _ramp_seed() -> int:
    """This process's secret, drawn on first use (a forked worker draws its own: the template
    that forks it never fingerprints)."""
    pid = os.getpid()
    if pid not in _secret:
        _secret.clear()
        _ramps.clear()
        _secret[pid] = secrets.randbits(63)
    return _secret[pid]


def _ramp_block(start: int) -> torch.Tensor:
    """The odd weights for elements ``start`` to ``start + RAMP_BLOCK`` of every chunk."""
    gen = torch.Generator().manual_seed(derive_seed(_ramp_seed(), "ramp", start))
    return _randint(0, 1 << 30, (RAMP_BLOCK,), generator=gen, dtype=torch.int64) * 2 + 1


def _ramp(device: torch.device, dtype: torch.dtype, length: int) -> torch.Tensor:
    """At least ``min(length, FINGERPRINT_CHUNK)`` odd weights, from a secret seed (not
    guessable by code that has not found this tensor), so a weighted sum notices any single
    changed element.

    Drawn in blocks of ``RAMP_BLOCK`` and only as far as the longest tensor fingerprinted so
    far: a process that fingerprints small tensors draws thousands of weights, not the chunk's
    16 million (0.5 s of CPU per worker). Each block's weights depend only on the secret and
    the block's offset, so a grown ramp keeps its first weights and a fingerprint taken before
    it grew is still valid after.
    """
    _ramp_seed()  # first: a forked process drops the ramps it inherited
    key = (str(device), dtype)
    need = min(max(length, 1), FINGERPRINT_CHUNK)
    have = _ramps.get(key)
    if have is None or have.numel() < need:
        start = 0 if have is None else have.numel()
        # whole blocks, at least doubling: ever longer tensors draw O(longest) weights in all
        wanted = max(need, 2 * start)
        target = min(FINGERPRINT_CHUNK, -(-wanted // RAMP_BLOCK) * RAMP_BLOCK)
        blocks = [
            _to(_ramp_block(offset), device=device, dtype=dtype)
            for offset in range(start, target, RAMP_BLOCK)
        ]
        grown = _cat(blocks if have is None else [have, *blocks])
        _ramps[key] = grown[:target]
    return _ramps[key]


def _checksums(t: torch.Tensor) -> torch.Tensor | None:
    """Two int64 checksums of the raw bits (plain sum, weighted sum), left on the device."""
    flat = _contiguous(_detach(t)).reshape(-1)
    if flat.dtype == torch.bool:
        flat = _to(flat, torch.uint8)
    if flat.element_size() not in _INT_VIEW or flat.numel() == 0:
        return None
    bits = _view(flat, _INT_VIEW[flat.element_size()])
    if bits.element_size() < 4:
        bits = _to(bits, torch.int32)
    ramp = _ramp(bits.device, bits.dtype, bits.numel())
    plain = _zeros((), dtype=torch.int64, device=bits.device)
    weighted = _zeros((), dtype=torch.int64, device=bits.device)
    for k, start in enumerate(range(0, bits.numel(), FINGERPRINT_CHUNK)):
        part = bits[start : start + FINGERPRINT_CHUNK]
        plain += _sum(part, dtype=torch.int64)  # per chunk: the widening copy stays small
        # products wrap around in the integer width: deterministic, and an odd weight keeps
        # every single-element change visible; the chunk number weighs the chunk's sum
        weighted += _sum(part * ramp[: part.numel()], dtype=torch.int64) * (2 * k + 1)
    return _stack([plain, weighted])


def fingerprint(t: torch.Tensor) -> tuple[int, ...]:
    """An exact content fingerprint: shape, dtype and two integer checksums of the raw bits.

    Computed on the tensor's device with integer arithmetic (a few passes over the data, one
    synchronisation), so it is cheap on the GPU and free of rounding; any change of a single
    element changes it.
    """
    return fingerprint_nested(t)[0]


def fingerprint_nested(value: Any) -> list[tuple[int, ...]]:
    """Fingerprints of every tensor in a nest, with a single device synchronisation."""
    tensors = list(iter_tensors(value))
    sums = [_checksums(t) for t in tensors]
    present = [s for s in sums if s is not None]
    values: list[list[int]] = []
    if len({str(s.device) for s in present}) == 1:
        values = _to(_stack(present), "cpu").tolist()
    else:
        values = [_to(s, "cpu").tolist() for s in present]
    it = iter(values)
    out = []
    for t, s in zip(tensors, sums, strict=True):
        a, b = next(it) if s is not None else (0, 0)
        out.append((*t.shape, hash(str(t.dtype)), int(a), int(b)))
    return out


def describe_shapes(value: Any) -> str:
    parts = [f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in iter_tensors(value)]
    return ", ".join(parts) if parts else "(no tensors)"
