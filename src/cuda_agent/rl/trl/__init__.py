"""Training with TRL's ``GRPOTrainer`` on one node: the ``grpo`` stage and the curriculum's
single-turn GRPO.

``grpo`` (GRPO over full agent episodes, each one ``env.KernelEnv``: the agent's tools in a
sandboxed workdir, rewarded by the harness), ``single_turn`` (GRPO on one reply per prompt,
a curriculum rung's task scoring it), ``settings`` (the ``GRPOConfig`` both share),
``step_log`` (one JSON line per optimizer step). Importing this package loads nothing (TRL
itself is imported by the functions that train).
"""
