"""Filling the memory a candidate is given uninitialised, for as long as a ``with`` block lasts.

``uninitialised_memory_filled`` turns on torch's deterministic mode (warnings only, never an
error) with ``fill_uninitialized_memory``: every ``empty``-family allocation, ``torch::empty_like``
in an extension too, is filled with NaN (floating types) or the integer maximum. A kernel that
reads memory it never wrote then sees NaN, not whatever a recycled block or a fresh allocation
happened to hold. Both settings are restored when the block ends, and only deterministic mode's
own warnings are dropped inside it.

Used by the memory check (``modes/memory_check.py``: the whole checked forward) and by
verification's zero-edged call (``verify._right_on_edged_copies``). What it does not do: fill
memory a kernel allocates without torch (``cudaMalloc``, ``malloc``), or change what a
deterministic-mode warning would have made an error (warn-only throughout).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def uninitialised_memory_filled() -> Iterator[None]:
    """While open, every ``empty``-family allocation is filled (NaN for floating types)."""
    import torch.utils.deterministic as deterministic

    enabled = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    filled = deterministic.fill_uninitialized_memory  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*deterministic.*")
        torch.use_deterministic_algorithms(True, warn_only=True)
        deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
        try:
            yield
        finally:
            deterministic.fill_uninitialized_memory = filled  # type: ignore[attr-defined]
            torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
