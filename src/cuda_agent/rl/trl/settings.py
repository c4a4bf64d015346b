"""The ``GRPOConfig`` settings our TRL runs share (agentic and single-turn).

``grpo_settings(...)`` returns the keyword arguments for TRL's ``GRPOConfig``: one prompt
group per optimizer step (``per_device_train_batch_size = num_generations``, no gradient
accumulation), float32, no checkpointing, no reporting, a log line every step, nothing saved;
``use_cpu`` defaults to "no CUDA device".

``StableGRPO`` is the curriculum runs' guard against the collapse seen on the 0.5B
(docs/training.md "GRPO that does not collapse"): many groups per optimizer step (``rollouts``,
generated at once and taken in micro-batches of ``micro_batch`` by gradient accumulation, so
still one on-policy update per generation), the sequence-mean loss (``loss_type="grpo"``: a
reply's total push does not grow with its length, so a short failure is not the cheapest), a
KL anchor (``beta``), a small constant learning rate, truncated replies left out of the loss,
and DAPO's clip-higher. ``StableGRPO.config()`` gives the ``GRPOConfig`` keywords it sets
(TRL 1.16's names, checked against the installed ``GRPOConfig`` by a test).

What it does not do: import TRL or hold any engine-specific option (the callers add theirs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


def grpo_settings(
    out: Path,
    steps: int,
    num_generations: int,
    max_completion_length: int,
    learning_rate: float,
    seed: int,
    use_cpu: bool | None,
    config_class: type,
) -> dict[str, Any]:
    """The ``GRPOConfig`` keywords of a run (module docstring); ``config_class``: the
    installed TRL's ``GRPOConfig``, whose fields name the options this TRL knows."""
    import torch

    config_fields = getattr(config_class, "__dataclass_fields__", {})
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in config_fields
        else "gradient_checkpointing"
    )
    return {
        "output_dir": str(out / "trainer"),
        "max_steps": steps,
        "per_device_train_batch_size": num_generations,  # one prompt group per step
        "gradient_accumulation_steps": 1,
        "num_generations": num_generations,
        "max_completion_length": max_completion_length,
        "learning_rate": learning_rate,
        "seed": seed,
        "use_cpu": (not torch.cuda.is_available()) if use_cpu is None else use_cpu,
        "bf16": False,
        "fp16": False,
        # renamed activation_checkpointing in recent transformers (the old name warns)
        checkpointing: False,
        "report_to": "none",
        "logging_steps": 1,
        "save_strategy": "no",
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }


@dataclass(frozen=True)
class StableGRPO:
    """GRPO settings set against collapse (module docstring); the defaults are the recipe's."""

    num_generations: int = 8  # replies per prompt: one group
    rollouts: int = 64  # replies per optimizer step (rollouts / num_generations groups)
    micro_batch: int = 16  # replies per forward/backward (gradient accumulation)
    learning_rate: float = 1e-6
    beta: float = 0.04  # KL to the starting policy
    loss_type: str = "grpo"  # per-reply mean over its tokens, then over replies
    scale_rewards: str = "group"
    epsilon: float = 0.2
    epsilon_high: float = 0.28
    lr_scheduler_type: str = "constant"
    mask_truncated_completions: bool = True
    max_grad_norm: float = 1.0

    def check(self) -> StableGRPO:
        if self.num_generations < 2:
            raise ValueError("GRPO needs at least 2 replies per group")
        if self.rollouts % self.num_generations or self.rollouts % self.micro_batch:
            raise ValueError(
                f"GRPO rollouts ({self.rollouts}) must be a multiple of num_generations "
                f"({self.num_generations}) and of micro_batch ({self.micro_batch})"
            )
        if self.micro_batch % self.num_generations:
            raise ValueError(
                f"GRPO micro_batch ({self.micro_batch}) must hold whole groups of "
                f"{self.num_generations}"
            )
        return self

    def config(self) -> dict[str, Any]:
        """The ``GRPOConfig`` keywords of these settings."""
        self.check()
        accumulation = self.rollouts // self.micro_batch
        return {
            "num_generations": self.num_generations,
            "per_device_train_batch_size": self.micro_batch,
            "gradient_accumulation_steps": accumulation,
            "steps_per_generation": accumulation,  # one generation, one update
            "num_iterations": 1,
            "learning_rate": self.learning_rate,
            "beta": self.beta,
            "loss_type": self.loss_type,
            "scale_rewards": self.scale_rewards,
            "epsilon": self.epsilon,
            "epsilon_high": self.epsilon_high,
            "lr_scheduler_type": self.lr_scheduler_type,
            "warmup_steps": 0,
            "mask_truncated_completions": self.mask_truncated_completions,
            "max_grad_norm": self.max_grad_norm,
        }
