"""Statistics that tell learning from noise in held-out evaluations of a model on the curriculum.

An evaluation (``evaluate.evaluate_split``) scores ``samples`` replies per problem. Those
replies are not independent: replies to one problem pass or fail together far more often than
replies to different problems, so an interval over replies (a Wilson interval on the pooled
pass rate) is too narrow, and more samples per problem narrow it further without telling more
about unseen problems. Here the problem is the unit:

* ``arm_from_replies(name, replies)`` reduces one evaluation (an "arm": a model, a temperature,
  a seed) to an ``Arm``: per problem, the replies that passed (reward >= 1) and the replies
  scored; the outcome counts (format, build, wrong, pass); the replies that carried an integrity
  flag and still earned a reward (``rewarded_flagged``: must be 0); and, where replies carry
  them, passes per op and per family (a reply counts for every op it names);
* ``pass_rate_interval(arm)``: the mean over problems of the per-problem pass rate (every
  problem weighs the same), with a 95% percentile bootstrap interval from resampling problems
  with replacement;
* ``paired_difference(after, before)``: the mean per-problem difference in pass rate on the
  same problems, its 95% bootstrap interval (the same resampled problems for both arms), an
  exact two-sided sign test over the problems that changed, and how many improved, got worse
  or stayed the same;
* ``pass_at_k(n, c, k)``: the unbiased pass@k estimator, and ``mean_pass_at_k(arm, k)`` over
  problems;
* ``markdown_table``, ``per_op_table`` and ``to_dict``: a table per arm against a baseline arm,
  one per op (or family), and the JSON-ready form of both.

Bootstraps draw from ``numpy.random.default_rng(seed)``: the same seed gives the same interval,
and the order of the replies does not matter (problems are sorted by spec).

What it does not do: run or score anything (the replies come scored), correct for testing many
arms against one baseline, or judge whether the problems are a fair sample of anything (a
bootstrap over problems says what other problems drawn the same way would show).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

OUTCOMES = ("format", "build", "wrong", "pass")  # as tasks.OUTCOMES (not imported: it loads torch)
PASS_REWARD = 1.0  # a reply passes at this reward or more (evaluate_split's pass rate)
FASTER_REWARD = 2.0  # ... and beats eager at this reward or more
CONFIDENCE = 0.95
_BLOCK = 1 << 20  # resampled problem indices drawn at once (bounds the memory of a bootstrap)


@dataclass(frozen=True)
class Arm:
    """One evaluated arm. ``problems`` are sorted; ``passed[i]`` of ``samples[i]`` replies to
    ``problems[i]`` passed, with mean reward ``rewards[i]``. ``outcomes``: replies per outcome
    (every key of ``OUTCOMES``); ``faster``: replies that beat eager; ``flagged``: replies with
    an integrity flag; ``rewarded_flagged``: those of them with reward > 0 (must be 0).
    ``op_passed`` / ``op_replies`` (and the ``family_`` pair): passes and replies per op (per
    family) among the replies that name their ops (family)."""

    name: str
    problems: tuple[str, ...]
    passed: tuple[int, ...]
    samples: tuple[int, ...]
    rewards: tuple[float, ...]
    outcomes: dict[str, int] = field(default_factory=dict)
    faster: int = 0
    flagged: int = 0
    rewarded_flagged: int = 0
    op_passed: dict[str, int] = field(default_factory=dict)
    op_replies: dict[str, int] = field(default_factory=dict)
    family_passed: dict[str, int] = field(default_factory=dict)
    family_replies: dict[str, int] = field(default_factory=dict)

    @property
    def replies(self) -> int:
        return sum(self.samples)

    def rates(self) -> NDArray[np.float64]:
        """The pass rate of every problem, in ``problems`` order."""
        return np.asarray(self.passed, dtype=np.float64) / np.asarray(self.samples, np.float64)


@dataclass(frozen=True)
class Difference:
    """``after`` minus ``before`` on the ``problems`` both share: ``mean`` per-problem
    difference in pass rate with its 95% bootstrap interval [``low``, ``high``], the sign
    test's two-sided ``p_value``, and how many problems ``improved``, got ``worse`` or stayed
    the ``same``. ``missing_after`` / ``missing_before``: problems only the other arm has
    (empty unless ``shared_only``)."""

    after: str
    before: str
    problems: int
    mean: float
    low: float
    high: float
    p_value: float
    improved: int
    worse: int
    same: int
    missing_after: tuple[str, ...] = ()
    missing_before: tuple[str, ...] = ()


def arm_from_replies(name: str, replies: Iterable[Mapping[str, Any]]) -> Arm:
    """The ``Arm`` of ``replies`` (``evaluate_split``'s: ``problem``, ``reward``,
    ``outcome``, ``flags``; optionally ``ops``, a list of op names, and ``family``)."""
    passed: Counter[str] = Counter()
    samples: Counter[str] = Counter()
    reward_sums: dict[str, float] = {}
    outcomes: Counter[str] = Counter({key: 0 for key in OUTCOMES})
    op_passed: Counter[str] = Counter()
    op_replies: Counter[str] = Counter()
    family_passed: Counter[str] = Counter()
    family_replies: Counter[str] = Counter()
    faster = flagged = rewarded_flagged = 0
    for index, reply in enumerate(replies):
        missing = [key for key in ("problem", "reward", "outcome") if key not in reply]
        if missing:
            raise ValueError(f"arm {name!r}: reply {index} has no {', '.join(missing)}")
        problem = str(reply["problem"])
        reward = float(reply["reward"])
        outcome = reply["outcome"]
        if outcome not in OUTCOMES:
            raise ValueError(
                f"arm {name!r}: reply {index} has outcome {outcome!r}, not one of {OUTCOMES}"
            )
        ok = reward >= PASS_REWARD
        samples[problem] += 1
        passed[problem] += ok
        reward_sums[problem] = reward_sums.get(problem, 0.0) + reward
        outcomes[outcome] += 1
        faster += reward >= FASTER_REWARD
        if reply.get("flags"):
            flagged += 1
            rewarded_flagged += reward > 0
        for op in dict.fromkeys(reply.get("ops") or ()):  # an op named twice counts once
            op_replies[str(op)] += 1
            op_passed[str(op)] += ok
        if reply.get("family") is not None:
            family_replies[str(reply["family"])] += 1
            family_passed[str(reply["family"])] += ok
    if not samples:
        raise ValueError(f"arm {name!r}: no replies")
    problems = tuple(sorted(samples))
    return Arm(
        name=name,
        problems=problems,
        passed=tuple(passed[p] for p in problems),
        samples=tuple(samples[p] for p in problems),
        rewards=tuple(reward_sums[p] / samples[p] for p in problems),
        outcomes=dict(outcomes),
        faster=faster,
        flagged=flagged,
        rewarded_flagged=rewarded_flagged,
        op_passed={op: op_passed[op] for op in sorted(op_replies)},
        op_replies={op: op_replies[op] for op in sorted(op_replies)},
        family_passed={f: family_passed[f] for f in sorted(family_replies)},
        family_replies={f: family_replies[f] for f in sorted(family_replies)},
    )


def bootstrap_means(
    values: NDArray[np.float64], resamples: int = 10000, seed: int = 0
) -> NDArray[np.float64]:
    """The mean of ``values`` over ``resamples`` resamples with replacement (one value per
    problem: the problems are what is resampled)."""
    if resamples < 1:
        raise ValueError(f"bootstrap: resamples must be >= 1, not {resamples}")
    count = len(values)
    if count == 0:
        raise ValueError("bootstrap: no values")
    rng = np.random.default_rng(seed)
    per_block = max(1, _BLOCK // count)
    means = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, per_block):
        stop = min(resamples, start + per_block)
        indices = rng.integers(0, count, size=(stop - start, count))
        means[start:stop] = values[indices].mean(axis=1)
    return means


def _interval(values: NDArray[np.float64], resamples: int, seed: int) -> tuple[float, float]:
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(bootstrap_means(values, resamples, seed), [tail, 100 - tail])
    return float(low), float(high)


def pass_rate_interval(
    arm: Arm, resamples: int = 10000, seed: int = 0
) -> tuple[float, float, float]:
    """``(rate, low, high)``: the mean over problems of the per-problem pass rate and its 95%
    percentile bootstrap interval over problems."""
    rates = arm.rates()
    low, high = _interval(rates, resamples, seed)
    return float(rates.mean()), low, high


def sign_test(improved: int, worse: int) -> float:
    """The exact two-sided sign test's p-value for ``improved`` problems up and ``worse``
    down (ties left out): 1 when nothing changed."""
    if improved < 0 or worse < 0:
        raise ValueError(f"sign_test: counts must be >= 0, not {improved} and {worse}")
    changed = improved + worse
    if changed == 0:
        return 1.0
    tail = sum(math.comb(changed, i) for i in range(min(improved, worse) + 1))
    return min(1.0, 2 * tail / 2**changed)


def paired_difference(
    after: Arm, before: Arm, resamples: int = 10000, seed: int = 0, *, shared_only: bool = False
) -> Difference:
    """``after`` minus ``before``, problem by problem. A paired comparison needs the same
    problems in both arms: a problem in only one raises ``ValueError`` naming it, unless
    ``shared_only`` (then the shared problems are compared and the others listed); none shared
    always raises."""
    after_rates = dict(zip(after.problems, after.rates().tolist(), strict=True))
    before_rates = dict(zip(before.problems, before.rates().tolist(), strict=True))
    shared = sorted(after_rates.keys() & before_rates.keys())
    missing_after = tuple(sorted(before_rates.keys() - after_rates.keys()))
    missing_before = tuple(sorted(after_rates.keys() - before_rates.keys()))
    if not shared or ((missing_after or missing_before) and not shared_only):
        raise ValueError(
            f"paired_difference {after.name!r} vs {before.name!r}: "
            f"{len(shared)} problems shared; missing from {after.name!r}: "
            f"{_listing(missing_after)}; missing from {before.name!r}: {_listing(missing_before)}"
        )
    differences = np.array([after_rates[p] - before_rates[p] for p in shared], dtype=np.float64)
    improved = int((differences > 0).sum())
    worse = int((differences < 0).sum())
    low, high = _interval(differences, resamples, seed)
    return Difference(
        after=after.name,
        before=before.name,
        problems=len(shared),
        mean=float(differences.mean()),
        low=low,
        high=high,
        p_value=sign_test(improved, worse),
        improved=improved,
        worse=worse,
        same=len(shared) - improved - worse,
        missing_after=missing_after,
        missing_before=missing_before,
    )


def _listing(problems: Sequence[str], most: int = 5) -> str:
    if not problems:
        return "none"
    shown = ", ".join(problems[:most])
    return f"{shown} (+{len(problems) - most} more)" if len(problems) > most else shown


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from ``c`` passes in ``n`` samples of one problem:
    ``1 - C(n - c, k) / C(n, k)``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n and 1 <= k <= n, not n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_pass_at_k(arm: Arm, k: int) -> float:
    """pass@k averaged over the arm's problems (every problem needs ``k`` samples or more)."""
    short = [p for p, n in zip(arm.problems, arm.samples, strict=True) if n < k]
    if short:
        raise ValueError(
            f"mean_pass_at_k {arm.name!r}: fewer than {k} samples for {_listing(short)}"
        )
    estimates = [pass_at_k(n, c, k) for n, c in zip(arm.samples, arm.passed, strict=True)]
    return sum(estimates) / len(estimates)


def outcome_mix(arm: Arm) -> dict[str, float]:
    """The share of the arm's replies in each outcome (``OUTCOMES`` order; sums to 1)."""
    return {key: arm.outcomes.get(key, 0) / arm.replies for key in OUTCOMES}


def op_rates(arm: Arm) -> dict[str, float]:
    """The pass rate of the replies to problems with each op."""
    return {op: arm.op_passed[op] / n for op, n in arm.op_replies.items()}


def family_rates(arm: Arm) -> dict[str, float]:
    """The pass rate of the replies to problems of each family."""
    return {f: arm.family_passed[f] / n for f, n in arm.family_replies.items()}


def _baseline(arms: Sequence[Arm], baseline: str) -> Arm:
    names = [arm.name for arm in arms]
    if len(set(names)) != len(names):
        raise ValueError(f"arms: names must be unique, not {names}")
    for arm in arms:
        if arm.name == baseline:
            return arm
    raise ValueError(f"baseline {baseline!r} is not one of the arms {names}")


def _shape(arm: Arm) -> str:
    low, high = min(arm.samples), max(arm.samples)
    return f"{len(arm.problems)} x {low}" if low == high else f"{len(arm.problems)} x {low}-{high}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(
    arms: Sequence[Arm],
    baseline: str,
    resamples: int = 10000,
    seed: int = 0,
    *,
    k: int | None = None,
    shared_only: bool = False,
) -> str:
    """A Markdown table with one row per arm: problems x samples, the pass rate over problems
    with its 95% interval, the difference from ``baseline`` (an arm's name) with its interval
    and sign-test p, pass@``k`` (when given; n/a for an arm with fewer than ``k`` samples of
    a problem), the outcome mix and ``rewarded_flagged``."""
    base = _baseline(arms, baseline)
    header = ["arm", "problems x samples", "pass rate [95%]", f"vs {baseline} [95%], p"]
    header += [f"pass@{k}"] if k is not None else []
    header += ["/".join(OUTCOMES), "rewarded flagged"]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for arm in arms:
        rate, low, high = pass_rate_interval(arm, resamples, seed)
        if arm is base:
            versus = "(baseline)"
        else:
            d = paired_difference(arm, base, resamples, seed, shared_only=shared_only)
            versus = f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}], p={d.p_value:.3g}"
        mix = "/".join(f"{share:.2f}" for share in outcome_mix(arm).values())
        row = [arm.name, _shape(arm), f"{rate:.3f} [{low:.3f}, {high:.3f}]", versus]
        if k is not None:  # n/a for an arm with fewer samples a problem (greedy: one)
            row += [f"{mean_pass_at_k(arm, k):.3f}" if min(arm.samples) >= k else "n/a"]
        row += [mix, str(arm.rewarded_flagged)]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def per_op_table(arms: Sequence[Arm], by: str = "op") -> str:
    """A Markdown table with one row per op (``by="family"``: per family) and one column per
    arm: the pass rate of the replies that name it, and passed/replies (blank: none)."""
    if by not in ("op", "family"):
        raise ValueError(f"per_op_table: by is 'op' or 'family', not {by!r}")
    counts = [
        (arm.op_passed, arm.op_replies) if by == "op" else (arm.family_passed, arm.family_replies)
        for arm in arms
    ]
    keys = sorted({key for _, replies in counts for key in replies})
    header = [by, *(arm.name for arm in arms)]
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for key in keys:
        row = [key]
        for passed, replies in counts:
            n = replies.get(key, 0)
            row.append(f"{passed[key] / n:.2f} ({passed[key]}/{n})" if n else "")
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def to_dict(
    arms: Sequence[Arm],
    baseline: str,
    resamples: int = 10000,
    seed: int = 0,
    *,
    ks: Sequence[int] = (1,),
    shared_only: bool = False,
) -> dict[str, Any]:
    """The JSON-ready form of ``markdown_table`` and ``per_op_table``: the settings, and per
    arm its record (``asdict``), ``pass_rate`` ``[rate, low, high]``, ``pass_at_k`` (for every
    k in ``ks`` that all its problems have samples for, keyed by str(k)), ``outcome_mix``,
    ``op_rates``, ``family_rates`` and ``difference`` from the baseline (``None`` for it)."""
    base = _baseline(arms, baseline)
    out: list[dict[str, Any]] = []
    for arm in arms:
        record = asdict(arm)
        record["pass_rate"] = list(pass_rate_interval(arm, resamples, seed))
        record["pass_at_k"] = {
            str(k): mean_pass_at_k(arm, k) for k in ks if 1 <= k <= min(arm.samples)
        }
        record["outcome_mix"] = outcome_mix(arm)
        record["op_rates"] = op_rates(arm)
        record["family_rates"] = family_rates(arm)
        record["difference"] = (
            None
            if arm is base
            else asdict(paired_difference(arm, base, resamples, seed, shared_only=shared_only))
        )
        out.append(record)
    return {
        "baseline": baseline,
        "resamples": resamples,
        "seed": seed,
        "confidence": CONFIDENCE,
        "arms": out,
    }
