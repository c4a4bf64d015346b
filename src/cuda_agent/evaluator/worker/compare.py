"""Compare a candidate's output with the reference's: structure, type, layout, values.

Rules (each failure gives one precise line):

* the same nesting of tuples/lists/dicts; Python scalars equal (floats within tolerance);
* tensors are plain ``torch.Tensor`` (no subclass: lazy outputs cannot defer work), with the
  reference's shape, dtype and device, and no broadcast (zero-stride) dimension unless the
  reference has one;
* NaN exactly where the reference has NaN, the same infinities, finite elsewhere;
* ``|cand - ref| <= atol + rtol * |ref|`` element-wise, computed in float64.
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


@dataclass
class Comparison:
    ok: bool
    message: str = ""
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0

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
            return Comparison(False, f"{path}: expected a dict with keys {sorted(reference)}")
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
        return Comparison(False, f"{path}: expected {reference!r}, got {candidate!r}")
    if type(candidate) is not type(reference) or candidate != reference:
        return Comparison(False, f"{path}: expected {reference!r}, got {_kind(candidate)}")
    return Comparison(True)


def _compare_tensor(
    ref: torch.Tensor, cand: Any, atol: float, rtol: float, path: str
) -> Comparison:
    if type(cand) is not _Tensor and type(cand) is not type(ref):
        return Comparison(False, f"{path}: expected a plain torch.Tensor, got {_kind(cand)}")
    if tuple(cand.shape) != tuple(ref.shape):
        return Comparison(False, f"{path}: shape {list(cand.shape)}, expected {list(ref.shape)}")
    if cand.dtype != ref.dtype:
        return Comparison(False, f"{path}: dtype {cand.dtype}, expected {ref.dtype}")
    if cand.device != ref.device:
        return Comparison(False, f"{path}: on device {cand.device}, expected {ref.device}")
    for dim, (size, c_stride, r_stride) in enumerate(
        zip(cand.shape, cand.stride(), ref.stride(), strict=True)
    ):
        if size > 1 and c_stride == 0 and r_stride != 0:
            return Comparison(
                False,
                f"{path}: dimension {dim} is a broadcast view (stride 0); "
                "return a materialised tensor",
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
            )
        return Comparison(True)
    r = ref.detach().to(torch.float64)
    c = cand.detach().to(torch.float64)
    r_nan, c_nan = _isnan(r), _isnan(c)
    if bool((r_nan != c_nan).any()):
        where = (
            "NaN where the reference is finite"
            if bool((c_nan & ~r_nan).any())
            else "a number where the reference is NaN"
        )
        return Comparison(False, f"{path}: {where} ({int((r_nan != c_nan).sum())} elements)")
    r_inf, c_inf = _isinf(r), _isinf(c)
    if bool((r_inf != c_inf).any()) or bool((r[r_inf] != c[r_inf]).any()):
        return Comparison(
            False,
            f"{path}: infinities differ from the reference "
            f"({int((r_inf != c_inf).sum())} elements)",
        )
    finite = ~(r_nan | r_inf)
    diff = _where(finite, _abs(c - r), torch.zeros_like(r))
    bound = atol + rtol * _abs(r)
    bad = (diff > bound) & finite
    max_abs = float(diff.max().item())
    rel = _where(finite, diff / _abs(r).clamp_min(1e-12), torch.zeros_like(r))
    max_rel = float(rel.max().item())
    n_bad = int(bad.sum().item())
    if n_bad:
        flat = int(torch.argmax(_where(bad, diff, torch.zeros_like(diff))).item())
        index = _unravel(flat, tuple(ref.shape))
        expected, got = float(r.reshape(-1)[flat]), float(c.reshape(-1)[flat])
        return Comparison(
            False,
            f"{path}: {n_bad} of {ref.numel()} elements ({100.0 * n_bad / ref.numel():.2g}%) "
            f"differ beyond atol={atol:g}, rtol={rtol:g}; max abs error {max_abs:.4g} at "
            f"{list(index)}: expected {expected:.6g}, got {got:.6g}",
            max_abs,
            max_rel,
        )
    return Comparison(True, "", max_abs, max_rel)


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
