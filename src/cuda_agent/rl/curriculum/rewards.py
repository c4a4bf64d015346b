"""The reward a curriculum training run learns from: the harness's, or one with graded failures.

``training_reward(verdict, scheme)``:

* ``harness`` (the default): the evaluator's reward as it is: -1 for every failure, 1 for a
  correct kernel, 2 or 3 for one faster than eager or ``torch.compile``;
* ``graded``: passes keep the harness's reward; failures are ranked so that a group of
  failing replies still has differences to learn from, and an empty reply is the worst
  choice rather than the cheapest: no answer or an integrity flag -1, a build (or load)
  failure -0.7, a built kernel that is wrong -0.4 (``GRADED``).

Held-out evaluations always use the harness's reward; only training may use ``graded``
(docs/training.md). What it does not do: evaluate anything (``verdicts``).
"""

from __future__ import annotations

from cuda_agent.rl.curriculum.verdicts import Verdict

SCHEMES = ("harness", "graded")
GRADED = {"format": -1.0, "build": -0.7, "wrong": -0.4}
FLAGGED = -1.0


def check_scheme(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise ValueError(f"training reward {scheme!r}: choose from {', '.join(SCHEMES)}")
    return scheme


def training_reward(verdict: Verdict, scheme: str = "harness") -> float:
    """The reward ``verdict`` earns in training under ``scheme`` (module docstring)."""
    if check_scheme(scheme) == "harness" or verdict.passed:
        return verdict.reward
    if verdict.flags:
        return FLAGGED
    return GRADED[verdict.outcome]
