"""The ``GRPOConfig`` settings our TRL runs share (agentic and single-turn).

``grpo_settings(...)`` returns the keyword arguments for TRL's ``GRPOConfig``: one prompt
group per optimizer step (``per_device_train_batch_size = num_generations``, no gradient
accumulation), float32, no checkpointing, no reporting, a log line every step, nothing saved;
``use_cpu`` defaults to "no CUDA device". What it does not do: import TRL or hold any
engine-specific option (the callers add theirs).
"""

from __future__ import annotations

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
    config_fields: dict[str, Any],
) -> dict[str, Any]:
    """``config_fields``: ``GRPOConfig.__dataclass_fields__`` (the names this TRL knows)."""
    import torch

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
