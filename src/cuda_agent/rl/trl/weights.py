"""Whether a training run moved a model's weights: a copy of its trainable weights before,
compared with them after.

``snapshot(model)`` copies every trainable parameter to the CPU; ``moved(before, model)`` says
whether any of them differs now. The TRL drivers (``grpo``, ``single_turn``, ``sft``) report
it as ``changed_params``. What it does not do: measure how far they moved.
"""

from __future__ import annotations

from typing import Any


def snapshot(model: Any) -> dict[str, Any]:
    """A CPU copy of ``model``'s trainable parameters, by name."""
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def moved(before: dict[str, Any], model: Any) -> bool:
    """Whether any parameter in ``before`` differs in ``model`` now."""
    import torch

    after = dict(model.named_parameters())
    return any(not torch.equal(before[n], after[n].detach().cpu()) for n in before)
