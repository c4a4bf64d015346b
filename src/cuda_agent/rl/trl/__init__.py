"""Training with TRL's ``GRPOTrainer`` on one node: the ``grpo`` stage and the curriculum's
single-turn GRPO.

``grpo`` (GRPO over full agent episodes, each one ``env.KernelEnv``: the agent's tools in a
sandboxed workdir, rewarded by the harness), ``single_turn`` (GRPO on one reply per prompt,
a curriculum rung's task scoring it), ``settings`` (the ``GRPOConfig`` both share),
``step_log`` (one JSON line per optimizer step). Importing this package loads nothing (TRL
itself is imported by the functions that train, or at once by ``import_trainers``).
"""

from __future__ import annotations


def import_trainers() -> None:
    """TRL's GRPO and SFT trainers and what they load (torch, transformers, datasets), imported
    without the cyclic collector and then frozen (``core/startup.py``): the collector walked
    the growing heap again and again during these imports, about 0.3 s of a training command's
    4.6 s of imports on the 2-core machine (4.18-4.36 s against 4.52-4.69 s)."""
    from cuda_agent.core.startup import without_collection

    with without_collection():
        import datasets  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
        from trl import GRPOTrainer, SFTTrainer  # noqa: F401
