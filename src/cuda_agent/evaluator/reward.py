"""Rewards from a verdict and its speed-ups (the paper's milestone schedule and a variant).

Milestone (the paper's): -1 if not correct (including build failures and integrity
violations); 3 if more than ``margin`` faster than both eager and torch.compile; 2 if more than
``margin`` faster than eager; else 1. "More than 5% faster" means ``t < (1 - 0.05) * t_base``.
Continuous (for ablations): ``t_compile / t`` (``t_eager / t`` when compile was not measured),
-1 if not correct.
"""

from __future__ import annotations


def beats(speedup: float | None, margin: float) -> bool:
    """``t < (1 - margin) * t_base``, written with the speed-up ``t_base / t``."""
    return speedup is not None and speedup * (1.0 - margin) > 1.0


def milestone_reward(
    correct: bool, speedup_eager: float | None, speedup_compile: float | None, margin: float = 0.05
) -> float:
    if not correct:
        return -1.0
    if beats(speedup_eager, margin):
        return 3.0 if beats(speedup_compile, margin) else 2.0
    return 1.0


def continuous_reward(
    correct: bool, speedup_eager: float | None, speedup_compile: float | None
) -> float:
    if not correct:
        return -1.0
    if speedup_compile is not None:
        return speedup_compile
    return speedup_eager if speedup_eager is not None else 1.0


def compute_reward(
    kind: str,
    correct: bool,
    speedup_eager: float | None,
    speedup_compile: float | None,
    margin: float = 0.05,
) -> float:
    if kind == "continuous":
        return continuous_reward(correct, speedup_eager, speedup_compile)
    return milestone_reward(correct, speedup_eager, speedup_compile, margin)
