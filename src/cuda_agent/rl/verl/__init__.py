"""Adapters that verl (0.9.1) loads by name when ``cuda-agent train`` runs one of the paper's
PPO stages on a Ray cluster.

``compat`` (verl's names, Hydra overrides and a stand-in runtime for tests), ``data`` (the
parquet rows verl reads), ``agent_loop`` (the multi-turn agent loop verl calls per
trajectory, with ``token_rollout`` and ``episode_tokens`` keeping the episode as tokens),
``reward`` (the single-turn reward function), ``evaluation_config`` (where both adapters
evaluate: the stage's ``evaluation`` section). Importing this package loads nothing (verl
itself is imported only where it runs).
"""
