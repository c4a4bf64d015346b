"""GRPO micro-batches with no learning signal skip their forward and backward.

Without a KL term (``beta`` 0, TRL's default), every GRPO loss TRL offers is a sum of
per-token terms each multiplied by its reply's advantage. A micro-batch whose advantages are
all zero (every reply of its groups got the same reward: the usual case for a model that fails
every reply, and for one that passes every reply) has a loss of exactly 0 and a gradient of
exactly 0, yet TRL runs the policy's forward and backward over it: for the 0.5B on two CPU
cores, 22 s of a 59 s step whose four replies all failed to build. ``grpo_trainer_class()``
is TRL's ``GRPOTrainer`` with ``compute_loss`` returning a zero loss for such a micro-batch
without touching the model: its parameters get no gradient (``None``, not zeros), so the
optimizer leaves them, and their moment estimates, as they were (TRL's way would advance
Adam's step count on a zero gradient; the weights stay the same either way).

Each step logs ``flat_share``: the share of its micro-batches skipped so (0.0 when none was).

What it does not do: skip anything when ``beta`` is not 0 (the KL term has a gradient of its
own) or when training runs in more than one process (a rank that skipped its forward would
leave the others waiting in their collectives).
"""

from __future__ import annotations

import functools
from typing import Any

FLAT_METRIC = "flat_share"


@functools.cache
def grpo_trainer_class() -> type:
    """The installed TRL's ``GRPOTrainer``, skipping micro-batches whose advantages are all 0."""
    import torch
    from trl import GRPOTrainer

    class FlatSkippingGRPOTrainer(GRPOTrainer):  # type: ignore[misc,unused-ignore]
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            mode = "train" if model.training else "eval"
            if not return_outputs and has_no_signal(self.beta, self.accelerator, inputs):
                self._metrics[mode][FLAT_METRIC].append(1.0)
                return torch.zeros((), device=inputs["advantages"].device, requires_grad=True)
            self._metrics[mode][FLAT_METRIC].append(0.0)
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    return FlatSkippingGRPOTrainer


def has_no_signal(beta: float, accelerator: Any, inputs: dict[str, Any]) -> bool:
    """Whether this micro-batch's loss and gradient are exactly 0 (module docstring)."""
    advantages = inputs.get("advantages")
    return (
        beta == 0.0
        and accelerator.num_processes == 1
        and advantages is not None
        and advantages.numel() > 0
        and not bool(advantages.any())
    )
