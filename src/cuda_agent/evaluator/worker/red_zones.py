"""Red zones: the last verification trial gives each input as a view inside a larger buffer
whose edges hold NaN, at full speed.

In the last trial (``verify.verify_trials``) ModelNew's copy of the inputs is made by
``guard_inputs``: every floating-point tensor (contiguous, not empty) sits in the middle of a
buffer of its own with a guard region before and after it: every byte 0xFF (NaN in every
floating type), 4 KiB to 1 MiB each side (two rows of the tensor's last dimension, within those
bounds; a multiple of 512 bytes, so the view keeps the alignment a fresh allocation has).
Then:

* a kernel that writes past either edge of an input changes a guard byte
  (``check_guards``): ``memory_error:access``;
* a kernel that reads past either edge and lets the value reach its output gives NaN there (or
  another wrong value): the trial's output is wrong, and where ModelNew called once more on copies
  of the same inputs inside buffers whose edges hold zeros (``guard_inputs(..., fill=0)``) is
  right, the verdict is ``memory_error:access`` (``read_outside``); where that call is wrong too,
  it is the trial's ``output_mismatch``. The second call's edges are zeros, not whatever lies
  beyond a plain copy: on the GPU the caching allocator puts a fresh copy next to recycled blocks,
  which can hold NaN (the guarded trial's own output, freed), so a plain copy failed alike and an
  out-of-bounds read was named a wrong output (H200, 2026-12-05). An earlier, plain trial that
  fails asks both calls (NaN edges wrong, zero edges right: ``memory_error:access``): its copy's
  slack can hold NaN too (cpu, CI, 2026-12-06). The zero-edged call fills the candidate's
  uninitialised allocations with NaN (``uninitialised.py``): a scratch it never writes, recycled
  from the NaN-edged call's freed guard bytes and harmless in the next call, was named a read past
  the edge (H100, 2026-12-06); filled, it is wrong there too and the trial's ``output_mismatch``
  stands.

It costs nothing when the candidate is right (the trial happens anyway; one or two more calls
only when a trial fails, to tell the two apart) and adds no call a candidate could count; nothing is
instrumented, so every candidate gets it, on both backends, before the memory check (which only
a correct candidate gets) and whatever the allocator put next to the input. What it cannot
see: a read whose value never reaches the output (``fmaxf`` with NaN, a read that is
discarded), accesses beyond the guards, accesses around buffers the candidate allocates itself
(its outputs, its scratch), and inputs that are not contiguous floating-point tensors (left as
they are). The memory check (``evaluator/checks/memory_safety.py``) covers the first three for
correct candidates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from cuda_agent.evaluator.worker.memory_flags import FLAG_ACCESS
from cuda_agent.evaluator.worker.session import Verdict
from cuda_agent.evaluator.worker.tensors import clone_nested

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

    fill: int = FILL_BYTE  # every byte of both guards

    def guards_intact(self) -> bool:
        before = self.buffer[: self.guard_bytes]
        after = self.buffer[self.guard_bytes + self.data_bytes :]
        return bool(_all(_equal(before, self.fill))) and bool(_all(_equal(after, self.fill)))


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


def guard_inputs(inputs: list[Any], fill: int = FILL_BYTE) -> tuple[list[Any], list[GuardedInput]]:
    """The inputs for the guarded call (each guardable tensor a view inside its guarded
    buffer, anything else a clone) and the guarded ones; ``fill``: every guard byte (0xFF,
    NaN, for the trial; 0, finite, for the call that tells a read outside from a wrong
    answer)."""
    args: list[Any] = []
    guarded: list[GuardedInput] = []
    for index, value in enumerate(inputs):
        if not guardable(value):
            args.append(clone_nested(value))
            continue
        guard = guard_bytes_for(value)
        data = value.numel() * value.element_size()
        buffer = _empty(2 * guard + data, dtype=torch.uint8, device=value.device)
        _fill(buffer, fill)
        view = buffer[guard : guard + data].view(value.dtype).view(value.shape)
        _copy(view, value)
        args.append(view)
        guarded.append(GuardedInput(index, view, buffer, guard, data, fill))
    return args, guarded


def check_guards(guarded: list[GuardedInput], trial: int) -> None:
    """A write into a guard is a ``memory_error:access`` verdict."""
    written = [g.index for g in guarded if not g.guards_intact()]
    if written:
        raise Verdict(
            "verify",
            f"trial {trial}: ModelNew wrote outside its input(s) "
            f"{', '.join(f'#{i}' for i in written)}: each input was given inside a larger buffer "
            "whose bytes just before and after it held NaN, and the kernel changed them (a write "
            "past an edge of a buffer)",
            [FLAG_ACCESS],
        )


def read_outside(trial: int, mismatch: str) -> Verdict:
    """The verdict for a guarded trial whose output was wrong while the same call on copies
    of the same inputs with zeros at their edges was right."""
    return Verdict(
        "verify",
        f"trial {trial}: with each input inside a larger buffer whose bytes just before and after "
        f"it held NaN, ModelNew's output was wrong ({mismatch}), and right on copies of the same "
        "inputs whose neighbouring bytes held zeros: a kernel reads outside its inputs (past an "
        "edge), or depends on where they lie in memory",
        [FLAG_ACCESS],
    )
