"""Compare a candidate's output with the reference's: structure, type, layout, values.

Rules (each failure gives one precise line):

* the same nesting of tuples/lists/dicts; Python scalars equal (floats within tolerance);
* tensors are plain ``torch.Tensor`` (no subclass: lazy outputs cannot defer work), with the
  reference's shape, dtype and device, and no broadcast (zero-stride) dimension unless the
  reference has one;
* NaN exactly where the reference has NaN, the same infinities, finite elsewhere;
* ``|cand - ref| <= atol + rtol * |ref|`` element-wise, exact as in float64 (a fast test in
  the tensor's own precision first, with a safety margin; float64 only where it is needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

_isnan = torch.isnan
_isinf = torch.isinf
_abs = torch.abs
_where = torch.where
_Tensor = torch.Tensor
_stack = torch.stack
CHUNK = 1 << 24  # elements compared at a time (float64 temporaries stay near 128 MiB each)


@dataclass
class Comparison:
    ok: bool
    message: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    kind: str = ""  # what differs: structure, type, shape, dtype, device, stride, nan, inf, ...

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
        }


def compare(
    reference: Any, candidate: Any, atol: float, rtol: float, path: str = "output"
) -> Comparison:
    if isinstance(reference, _Tensor):
        return _compare_tensor(reference, candidate, atol, rtol, path)
    if isinstance(reference, list | tuple):
        if not isinstance(candidate, list | tuple) or len(candidate) != len(reference):
            return Comparison(
                False,
                f"{path}: expected a sequence of {len(reference)} items, got {_kind(candidate)}",
                kind="structure",
            )
        worst = Comparison(True)
        for i, (r, c) in enumerate(zip(reference, candidate, strict=True)):
            sub = compare(r, c, atol, rtol, f"{path}[{i}]")
            if not sub.ok:
                return sub
            worst = _worse(worst, sub)
        return worst
    if isinstance(reference, dict):
        if not isinstance(candidate, dict) or set(candidate) != set(reference):
            return Comparison(
                False, f"{path}: expected a dict with keys {sorted(reference)}", kind="structure"
            )
        worst = Comparison(True)
        for key in reference:
            sub = compare(reference[key], candidate[key], atol, rtol, f"{path}[{key!r}]")
            if not sub.ok:
                return sub
            worst = _worse(worst, sub)
        return worst
    if isinstance(reference, float) and isinstance(candidate, int | float):
        if math.isclose(candidate, reference, rel_tol=rtol, abs_tol=atol) or (
            math.isnan(reference) and math.isnan(candidate)
        ):
            return Comparison(True)
        return Comparison(False, f"{path}: expected {reference!r}, got {candidate!r}", kind="value")
    if type(candidate) is not type(reference) or candidate != reference:
        return Comparison(
            False, f"{path}: expected {reference!r}, got {_kind(candidate)}", kind="value"
        )
    return Comparison(True)


def _compare_tensor(
    ref: torch.Tensor, cand: Any, atol: float, rtol: float, path: str
) -> Comparison:
    if type(cand) is not _Tensor and type(cand) is not type(ref):
        return Comparison(
            False, f"{path}: expected a plain torch.Tensor, got {_kind(cand)}", kind="type"
        )
    if tuple(cand.shape) != tuple(ref.shape):
        return Comparison(
            False, f"{path}: shape {list(cand.shape)}, expected {list(ref.shape)}", kind="shape"
        )
    if cand.dtype != ref.dtype:
        return Comparison(False, f"{path}: dtype {cand.dtype}, expected {ref.dtype}", kind="dtype")
    if cand.device != ref.device:
        return Comparison(
            False, f"{path}: on device {cand.device}, expected {ref.device}", kind="device"
        )
    for dim, (size, c_stride, r_stride) in enumerate(
        zip(cand.shape, cand.stride(), ref.stride(), strict=True)
    ):
        if size > 1 and c_stride == 0 and r_stride != 0:
            return Comparison(
                False,
                f"{path}: dimension {dim} is a broadcast view (stride 0); "
                "return a materialised tensor",
                kind="stride",
            )
    if ref.numel() == 0:
        return Comparison(True)
    if ref.dtype == torch.bool or not (ref.is_floating_point() or ref.is_complex()):
        mismatched = int((cand != ref).sum().item())
        if mismatched:
            return Comparison(
                False,
                f"{path}: {mismatched} of {ref.numel()} elements differ "
                "(exact match required for this dtype)",
                kind="exact",
            )
        return Comparison(True)
    return _compare_floats(ref, cand, atol, rtol, path)


FAST_MARGIN = 1.0 - 2.0**-12  # the fast test's tolerance shrink: covers its own rounding


def _compare_floats(
    ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float, path: str
) -> Comparison:
    """NaN/Inf rules and the tolerance test, chunk by chunk (bounded extra memory).

    Each chunk first takes a fast test in its own precision (float32 for 16- and 32-bit
    floats) against a tolerance shrunk by ``FAST_MARGIN``, which more than covers that test's
    rounding, so a chunk it passes also passes the exact float64 test; its statistics stay on
    the device and everything synchronises once. Only chunks it cannot pass (a NaN, an
    infinity, an error near or over the tolerance) are judged again, exactly, in float64.
    """
    r_flat, c_flat = ref.detach().reshape(-1), cand.detach().reshape(-1)
    starts = list(range(0, r_flat.numel(), CHUNK))
    fast = [_fast_chunk(r_flat[s : s + CHUNK], c_flat[s : s + CHUNK], atol, rtol) for s in starts]
    verdicts = _stack(fast).tolist() if fast else []
    nan_mismatch = inf_mismatch = n_bad = 0
    nan_in_candidate = False
    max_abs = max_rel = 0.0
    worst: tuple[float, int, float, float] = (-1.0, -1, 0.0, 0.0)
    for start, (passed, chunk_abs, chunk_rel) in zip(starts, verdicts, strict=True):
        if passed:
            max_abs, max_rel = max(max_abs, chunk_abs), max(max_rel, chunk_rel)
            continue
        r = r_flat[start : start + CHUNK].to(torch.float64)
        c = c_flat[start : start + CHUNK].to(torch.float64)
        r_nan, c_nan = _isnan(r), _isnan(c)
        nan_diff = r_nan != c_nan
        if bool(nan_diff.any()):
            nan_mismatch += int(nan_diff.sum())
            nan_in_candidate |= bool((c_nan & ~r_nan).any())
            continue
        r_inf, c_inf = _isinf(r), _isinf(c)
        inf_diff = (r_inf != c_inf) | (r_inf & (r != c))
        if bool(inf_diff.any()):
            inf_mismatch += int(inf_diff.sum())
            continue
        finite = ~(r_nan | r_inf)
        diff = _where(finite, _abs(c - r), torch.zeros_like(r))
        bad = (diff > atol + rtol * _abs(r)) & finite
        max_abs = max(max_abs, float(diff.max().item()))
        rel = _where(finite, diff / _abs(r).clamp_min(1e-12), torch.zeros_like(r))
        max_rel = max(max_rel, float(rel.max().item()))
        chunk_bad = int(bad.sum().item())
        if chunk_bad:
            n_bad += chunk_bad
            masked = _where(bad, diff, torch.zeros_like(diff))
            local = int(torch.argmax(masked).item())
            value = float(masked[local].item())
            if value > worst[0]:
                worst = (value, start + local, float(r[local]), float(c[local]))
    if nan_mismatch:
        where = (
            "NaN where the reference is finite"
            if nan_in_candidate
            else "a number where the reference is NaN"
        )
        return Comparison(False, f"{path}: {where} ({nan_mismatch} elements)", kind="nan")
    if inf_mismatch:
        return Comparison(
            False,
            f"{path}: infinities differ from the reference ({inf_mismatch} elements)",
            kind="inf",
        )
    if n_bad:
        index = _unravel(worst[1], tuple(ref.shape))
        return Comparison(
            False,
            f"{path}: {n_bad} of {ref.numel()} elements ({100.0 * n_bad / ref.numel():.2g}%) "
            f"differ beyond atol={atol:g}, rtol={rtol:g}; max abs error {max_abs:.4g} at "
            f"{list(index)}: expected {worst[2]:.6g}, got {worst[3]:.6g}",
            max_abs,
            max_rel,
            kind="value",
        )
    return Comparison(True, "", max_abs, max_rel)


def _fast_chunk(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """[passed, max abs error, max rel error] of one chunk, as a float64 tensor on its device.

    ``passed`` is 1 only if every element is within the shrunk tolerance (any NaN or infinity
    fails it, since a NaN difference compares false).
    """
    if r.dtype != torch.float64:
        r, c = r.to(torch.float32), c.to(torch.float32)
    abs_r = _abs(r)
    diff = _abs(c - r)
    passed = (diff <= abs_r * (rtol * FAST_MARGIN) + atol * FAST_MARGIN).all()
    max_abs = diff.max()
    max_rel = (diff / abs_r.clamp_min(1e-12)).max()
    return _stack([passed.to(torch.float64), max_abs.to(torch.float64), max_rel.to(torch.float64)])


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return tuple(reversed(index))


def _worse(a: Comparison, b: Comparison) -> Comparison:
    return Comparison(
        True, "", max(a.max_abs_error, b.max_abs_error), max(a.max_rel_error, b.max_rel_error)
    )


def _kind(value: Any) -> str:
    if isinstance(value, _Tensor):
        return f"{type(value).__module__}.{type(value).__name__}"
    return type(value).__name__
