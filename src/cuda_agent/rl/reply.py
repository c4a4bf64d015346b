"""A single-turn reply's solution file, and the score record a reply's evaluation becomes.

Every single-turn reward reads a reply the same way and reports the same numbers: verl's
reward function (``verl/reward.py``), the reward service's clients (``service_reward.py``)
and the curriculum's ``model-new`` task (``curriculum/tasks.py``). Here:

* ``extract_solution(reply)``: the last fenced code block of the reply that defines
  ``class ModelNew`` (any language tag, or none), else the whole reply if it defines one,
  else None: a KernelBench single file;
* ``score_record(result)``: the dict verl logs for a reply, ``score`` first, with the same
  numeric keys every time: ``correct``, ``compiled``, ``speedup_eager`` and
  ``speedup_compile`` (0.0 when not measured), ``no_solution``; ``None`` (no solution in the
  reply) scores ``NO_SOLUTION_REWARD`` (-1), as every incorrect solution does.

What it does not do: evaluate anything, parse tool calls, or read a curriculum task's answer
format (``curriculum/tasks.py`` does).
"""

from __future__ import annotations

import re

from cuda_agent.core.types import EvalResult

NO_SOLUTION_REWARD = -1.0
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)


def extract_solution(reply: str) -> str | None:
    """The solution file in a reply (see the module docstring), or None."""
    blocks = [b for b in _FENCE.findall(reply) if _MODEL_NEW.search(b)]
    if blocks:
        return blocks[-1]
    if "```" not in reply and _MODEL_NEW.search(reply):
        return reply
    return None


def score_record(result: EvalResult | None) -> dict[str, float]:
    """What a reward function returns for one reply (``None``: the reply had no solution)."""
    if result is None:
        return {
            "score": NO_SOLUTION_REWARD,
            "correct": 0.0,
            "compiled": 0.0,
            "speedup_eager": 0.0,
            "speedup_compile": 0.0,
            "no_solution": 1.0,
        }
    return {
        "score": float(result.reward),
        "correct": float(result.correct),
        "compiled": float(result.compiled),
        "speedup_eager": float(result.speedup_eager or 0.0),
        "speedup_compile": float(result.speedup_compile or 0.0),
        "no_solution": 0.0,
    }
