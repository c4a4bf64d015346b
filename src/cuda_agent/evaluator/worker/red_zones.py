"""Red zones: the candidate once more, each input a view inside a larger buffer whose edges
hold NaN, at full speed.

After the verification trials pass, ``guarded_trial`` calls ModelNew on one more clone of a
verified input set in which every floating-point tensor (contiguous, not empty) sits in the
middle of a buffer of its own with a guard region before and after it: every byte 0xFF (NaN in
every floating type), 4 KiB to 1 MiB each side (two rows of the tensor's last dimension, within
those bounds; a multiple of 512 bytes, so the view keeps the alignment a fresh allocation
has). Then:

* a kernel that reads past either edge of an input and lets the value reach its output gives
  NaN there (or another wrong value), and the output no longer matches the reference's on the
  same inputs: ``memory_error:access``;
* a kernel that writes past either edge of an input changes a guard byte:
  ``memory_error:access``.

It costs one forward of each model; nothing is instrumented, so every candidate gets it, on
both backends, before the memory check (which only a correct candidate gets) and whatever the
allocator put next to the input. What it cannot see: a read whose value never reaches the
output (``fmaxf`` with NaN, a read that is discarded), accesses beyond the guards, accesses
around buffers the candidate allocates itself (its outputs, its scratch), and inputs that are
not contiguous floating-point tensors (left as they are). The memory check
(``evaluator/memory_check.py``) covers the first three for correct candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.memory_flags import FLAG_ACCESS
from cuda_agent.evaluator.worker.session import EvaluationSession, Verdict, call
from cuda_agent.evaluator.worker.tensors import clone_nested
from cuda_agent.evaluator.worker.verify import integrity, raised

GUARD_MIN_BYTES = 4096
GUARD_MAX_BYTES = 1 << 20
ALIGN_BYTES = 512
FILL_BYTE = 0xFF  # NaN in float16, bfloat16, float32 and float64

_empty = torch.empty
_equal = torch.Tensor.eq
_all = torch.Tensor.all
_fill = torch.Tensor.fill_
_copy = torch.Tensor.copy_
_Tensor = torch.Tensor


@dataclass
class GuardedInput:
    """One input inside its guarded buffer: ``view`` is what the candidate gets."""

    index: int
    view: torch.Tensor
    buffer: torch.Tensor  # uint8: guard, the input's bytes, guard
    guard_bytes: int
    data_bytes: int

    def guards_intact(self) -> bool:
        before = self.buffer[: self.guard_bytes]
        after = self.buffer[self.guard_bytes + self.data_bytes :]
        return bool(_all(_equal(before, FILL_BYTE))) and bool(_all(_equal(after, FILL_BYTE)))


def guard_bytes_for(tensor: torch.Tensor) -> int:
    """Two rows of the last dimension, within [4 KiB, 1 MiB], rounded up to 512 bytes."""
    row = (tensor.shape[-1] if tensor.dim() else 1) * tensor.element_size()
    wanted = min(max(2 * row, GUARD_MIN_BYTES), GUARD_MAX_BYTES)
    return -(-wanted // ALIGN_BYTES) * ALIGN_BYTES


def guardable(value: Any) -> bool:
    return (
        isinstance(value, _Tensor)
        and value.is_floating_point()
        and value.is_contiguous()
        and value.numel() > 0
    )


def guard_inputs(inputs: list[Any]) -> tuple[list[Any], list[GuardedInput]]:
    """The inputs for the guarded call (each guardable tensor a view inside its guarded
    buffer, anything else a clone) and the guarded ones."""
    args: list[Any] = []
    guarded: list[GuardedInput] = []
    for index, value in enumerate(inputs):
        if not guardable(value):
            args.append(clone_nested(value))
            continue
        guard = guard_bytes_for(value)
        data = value.numel() * value.element_size()
        buffer = _empty(2 * guard + data, dtype=torch.uint8, device=value.device)
        _fill(buffer, FILL_BYTE)
        view = buffer[guard : guard + data].view(value.dtype).view(value.shape)
        _copy(view, value)
        args.append(view)
        guarded.append(GuardedInput(index, view, buffer, guard, data))
    return args, guarded


def guarded_trial(s: EvaluationSession) -> None:
    """The candidate on guarded inputs; raises a ``memory_error:access`` verdict if it wrote
    into a guard or its output changed (see the module docstring)."""
    ref, device = s.ref, s.device
    inputs = ref.verify_sets[-1]
    args, guarded = guard_inputs(inputs)
    if not guarded:
        return
    try:
        out = clone_nested(call(s.cand, args))
        device.synchronize()
    except Exception as err:
        what = "with its inputs inside guarded buffers, ModelNew.forward"
        raise raised(s, err, s.files, "verify", what) from None
    integrity(s, where="in the guarded call", inputs=False)
    written = [g.index for g in guarded if not g.guards_intact()]
    if written:
        raise Verdict(
            "verify",
            f"ModelNew wrote outside its input(s) {', '.join(f'#{i}' for i in written)}: each "
            "input was given inside a larger buffer whose bytes just before and after it held "
            "NaN, and the kernel changed them (a write past an edge of a buffer)",
            [FLAG_ACCESS],
        )
    if not ref.set_intact(len(ref.verify_sets) - 1):
        raise Verdict(
            "verify",
            "the harness's pristine inputs were modified during the guarded call",
            ["reference_inputs_mutated"],
        )
    expected = call(ref.model, clone_nested(inputs))
    device.synchronize()
    verdict = compare(expected, out, s.req.atol, s.req.rtol)
    if not verdict.ok:
        raise Verdict(
            "verify",
            "with each input inside a larger buffer whose bytes just before and after it held "
            f"NaN, ModelNew's output no longer matches ({verdict.message}), though it matched on "
            "the same values in plain tensors: a kernel reads outside its inputs (past an "
            "edge), or depends on where they lie in memory",
            [FLAG_ACCESS],
        )
