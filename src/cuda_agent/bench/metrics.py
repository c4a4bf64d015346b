"""The paper's metrics (and KernelBench's fast_p) over one chosen attempt per problem.

Exactly the definitions of the paper (reference-system.md, section 6):

* pass rate = correct / all;
* faster rate vs X = (correct and t < t_X) / all, with no margin;
* geomean speed-up vs X = geometric mean of t_X / t over the correct solutions that have it;
* "overall" = over all problems, i.e. the levels weighted by their problem counts;

plus KernelBench's fast_p = (correct and speed-up vs eager > p) / all for p in 0, 0.8, 1, 1.5,
2 (fast_0 is the pass rate) and the mean reward. Rates are fractions in [0, 1].

Every metric is given twice: over all problems (``overall``, ``levels``) and over the problems
with no task-lint flag (``no_lint_flag``: the same shape), since a degenerate problem (constant
output, independent of its inputs...) can be passed by a trivial kernel. ``problem_lint`` counts
the flagged, clean and unknown problems (unknown: no evaluation of it ran the lint; they count as
unflagged) and lists the flagged ones.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from cuda_agent.bench.records import AttemptRecord

FAST_P = (0.0, 0.8, 1.0, 1.5, 2.0)


def compute_metrics(chosen: dict[str, AttemptRecord]) -> dict[str, Any]:
    records = list(chosen.values())
    unflagged = [r for r in records if not r.problem_flags]
    flagged = {r.problem_id: r.problem_flags for r in records if r.problem_flags}
    return {
        **_by_level(records),
        "no_lint_flag": _by_level(unflagged),
        "problem_lint": {
            "flagged": len(flagged),
            "clean": sum(1 for r in records if r.problem_flags == []),
            "unknown": sum(1 for r in records if r.problem_flags is None),
            "flagged_problems": dict(sorted(flagged.items())),
        },
    }


def _by_level(records: list[AttemptRecord]) -> dict[str, Any]:
    by_level: dict[str, list[AttemptRecord]] = defaultdict(list)
    for record in records:
        by_level[str(record.level) if record.level is not None else "none"].append(record)
    return {
        "overall": summarise(records),
        "levels": {level: summarise(group) for level, group in sorted(by_level.items())},
    }


def summarise(records: list[AttemptRecord]) -> dict[str, Any]:
    n = len(records)
    correct = [r for r in records if r.correct]
    eager = [s for r in correct if (s := r.result.speedup_eager)]
    compiled = [s for r in correct if (s := r.result.speedup_compile)]
    rewards = [_number(r.result.reward, -1.0) for r in records]
    return {
        "n": n,
        "pass_rate": _rate(len(correct), n),
        "faster_rate_eager": _rate(sum(1 for s in eager if s > 1.0), n),
        "faster_rate_compile": _rate(sum(1 for s in compiled if s > 1.0), n),
        "geomean_speedup_eager": geomean(eager),
        "geomean_speedup_compile": geomean(compiled),
        "fast_p": {_p_key(p): _rate(sum(1 for r in correct if _beats(r, p)), n) for p in FAST_P},
        "mean_reward": sum(rewards) / n if n else None,
    }


def geomean(values: list[float]) -> float | None:
    positive = [v for v in values if v and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))


def _beats(record: AttemptRecord, p: float) -> bool:
    if p == 0.0:
        return True
    speedup = record.result.speedup_eager
    return speedup is not None and speedup > p


def _rate(count: int, n: int) -> float | None:
    return count / n if n else None


def _p_key(p: float) -> str:
    return f"{p:g}"


def _number(value: object, default: float) -> float:
    return float(value) if isinstance(value, int | float) else default
