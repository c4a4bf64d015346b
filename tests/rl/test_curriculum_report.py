"""Problem-level statistics of held-out evaluations (``rl.curriculum.report``): fast, no model,
no evaluator; the replies are written by hand in ``evaluate_split``'s form."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import pytest

from cuda_agent.rl.curriculum.report import (
    OUTCOMES,
    arm_from_replies,
    bootstrap_means,
    family_rates,
    markdown_table,
    mean_pass_at_k,
    op_rates,
    outcome_mix,
    paired_difference,
    pass_at_k,
    pass_rate_interval,
    per_op_table,
    sign_test,
    to_dict,
)


def reply(problem: str, ok: bool, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "problem": problem,
        "reply": "...",
        "answer": "fmaxf(x, 0.0f)" if ok else None,
        "reward": 1.0 if ok else -1.0,
        "error_stage": None,
        "outcome": "pass" if ok else "format",
        "flags": [],
    }
    return row | extra


def replies_for(passes: list[int], samples: int, copies: int = 1) -> list[dict[str, Any]]:
    """``passes[i]`` of ``samples`` replies to problem ``p{i}`` pass; every reply ``copies``
    times."""
    return [
        reply(f"p{i:02d}", j < c)
        for i, c in enumerate(passes)
        for j in range(samples)
        for _ in range(copies)
    ]


BASE = [i % 5 for i in range(48)]  # 0..4 of 8 pass, every problem room for 4 more
PLANTED = [c + 4 if i < 30 else c for i, c in enumerate(BASE)]


def test_identical_arms_differ_by_nothing() -> None:
    before = arm_from_replies("before", replies_for(BASE, 8))
    after = arm_from_replies("after", replies_for(BASE, 8))
    d = paired_difference(after, before)
    assert d.mean == 0.0
    assert d.low <= 0.0 <= d.high
    assert d.p_value == 1.0
    assert (d.improved, d.worse, d.same, d.problems) == (0, 0, 48, 48)


def test_planted_improvement_is_found() -> None:
    before = arm_from_replies("before", replies_for(BASE, 8))
    after = arm_from_replies("after", replies_for(PLANTED, 8))
    d = paired_difference(after, before)
    assert d.mean == pytest.approx(30 * 0.5 / 48)
    assert 0.0 < d.low < d.mean < d.high
    assert d.p_value == pytest.approx(2 / 2**30)
    assert (d.improved, d.worse, d.same) == (30, 0, 18)
    # and the other way round it is a loss
    back = paired_difference(before, after)
    assert back.high < 0.0 and (back.improved, back.worse) == (0, 30)


def test_a_mixed_change_is_not_significant() -> None:
    # 10 problems up by one pass, 8 down by one: the sign test and the interval both see noise
    passes = [c + 1 if i < 10 else c - 1 if i < 18 and c > 0 else c for i, c in enumerate(BASE)]
    before = arm_from_replies("before", replies_for(BASE, 8))
    after = arm_from_replies("after", replies_for(passes, 8))
    d = paired_difference(after, before)
    assert d.improved == 10 and d.worse > 0
    assert d.low < 0.0 < d.high
    assert d.p_value > 0.3


def reply_level_interval(replies: list[dict[str, Any]], resamples: int = 10000) -> float:
    """The width of a 95% bootstrap interval that resamples replies (what not to do)."""
    outcomes = np.array([r["reward"] >= 1.0 for r in replies], dtype=np.float64)
    means = bootstrap_means(outcomes, resamples, seed=0)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(high - low)


def test_resampling_is_over_problems_not_replies() -> None:
    eight = replies_for(BASE, 8)
    sixteen = replies_for(BASE, 8, copies=2)  # the same per-problem rates from 16 samples
    arm8, arm16 = arm_from_replies("eight", eight), arm_from_replies("sixteen", sixteen)
    assert arm16.samples == (16,) * 48 and arm8.samples == (8,) * 48
    assert pass_rate_interval(arm8) == pass_rate_interval(arm16)
    after8 = arm_from_replies("after8", replies_for(PLANTED, 8))
    after16 = arm_from_replies("after16", replies_for(PLANTED, 8, copies=2))
    d8, d16 = paired_difference(after8, arm8), paired_difference(after16, arm16)
    assert (d8.mean, d8.low, d8.high, d8.p_value) == (d16.mean, d16.low, d16.high, d16.p_value)
    # a reply-level interval would have narrowed by about 1/sqrt(2)
    assert reply_level_interval(sixteen) < 0.8 * reply_level_interval(eight)


def test_problem_interval_is_wider_than_replies_say_when_problems_pass_together() -> None:
    # every problem all-or-nothing: 8 samples per problem tell no more than one
    replies = replies_for([8 if i % 2 else 0 for i in range(48)], 8)
    rate, low, high = pass_rate_interval(arm_from_replies("clustered", replies))
    assert rate == 0.5
    assert high - low > 2 * reply_level_interval(replies)


def test_interval_width_matches_the_standard_error() -> None:
    rng = random.Random(3)
    passes = [rng.randint(0, 8) for _ in range(48)]
    arm = arm_from_replies("a", replies_for(passes, 8))
    rate, low, high = pass_rate_interval(arm)
    rates = np.array(passes) / 8
    assert rate == pytest.approx(rates.mean())
    half = 1.96 * rates.std() / math.sqrt(len(rates))
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)
    assert low < rate < high


def test_equal_weight_per_problem() -> None:
    # problem a: 1 of 1 passes; problem b: 0 of 3. Per problem 0.5; pooled over replies 0.25
    replies = [reply("a", True)] + [reply("b", False) for _ in range(3)]
    rate, _, _ = pass_rate_interval(arm_from_replies("uneven", replies))
    assert rate == 0.5


def test_same_seed_same_interval_and_order_does_not_matter() -> None:
    rng = random.Random(7)
    passes = [rng.randint(0, 8) for _ in range(48)]
    replies = replies_for(passes, 8)
    arm = arm_from_replies("a", replies)
    shuffled = list(replies)
    rng.shuffle(shuffled)
    assert arm_from_replies("a", shuffled) == arm
    assert pass_rate_interval(arm, seed=5) == pass_rate_interval(arm, seed=5)
    # another seed resamples other problems (the interval's ends are on a grid of 1/384, so
    # two seeds may still land on the same ends)
    rates = arm.rates()
    assert not np.array_equal(bootstrap_means(rates, seed=5), bootstrap_means(rates, seed=6))
    assert len({pass_rate_interval(arm, seed=s) for s in range(10)}) > 1
    before = arm_from_replies("b", replies_for(BASE, 8))
    assert paired_difference(arm, before, seed=1) == paired_difference(arm, before, seed=1)
    assert len({paired_difference(arm, before, seed=s) for s in range(10)}) > 1


def test_pass_at_k_by_hand() -> None:
    assert pass_at_k(8, 2, 1) == pytest.approx(0.25)
    assert pass_at_k(8, 2, 2) == pytest.approx(1 - 15 / 28)
    assert pass_at_k(8, 2, 8) == 1.0
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 0, 1) == 0.0
    assert pass_at_k(16, 1, 8) == pytest.approx(0.5)
    for bad in ((8, 9, 1), (8, 2, 0), (8, 2, 9), (8, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_mean_pass_at_k_over_problems() -> None:
    arm = arm_from_replies("a", replies_for([2, 0, 8], 8))
    assert mean_pass_at_k(arm, 1) == pytest.approx((0.25 + 0 + 1) / 3)
    assert mean_pass_at_k(arm, 8) == pytest.approx((1 + 0 + 1) / 3)
    with pytest.raises(ValueError, match="fewer than 9 samples"):
        mean_pass_at_k(arm, 9)


def test_outcome_mix_sums_to_one() -> None:
    kinds = ["format"] * 3 + ["build"] * 5 + ["wrong"] * 7 + ["pass"] * 9
    replies = [
        reply(f"p{i % 4}", kind == "pass") | {"outcome": kind} for i, kind in enumerate(kinds)
    ]
    arm = arm_from_replies("a", replies)
    mix = outcome_mix(arm)
    assert list(mix) == list(OUTCOMES)
    assert sum(mix.values()) == pytest.approx(1.0)
    assert mix == pytest.approx(
        {"format": 3 / 24, "build": 5 / 24, "wrong": 7 / 24, "pass": 9 / 24}
    )
    with pytest.raises(ValueError, match="outcome 'timeout'"):
        arm_from_replies("b", [reply("p", False) | {"outcome": "timeout"}])


def test_rewarded_flagged_counts_only_rewarded_flagged_replies() -> None:
    replies = [
        reply("p1", True) | {"flags": ["timing_tamper"]},  # rewarded and flagged: counts
        reply("p1", False) | {"flags": ["output_alias"], "reward": 0.0},
        reply("p2", False) | {"flags": ["output_alias"]},  # reward -1
        reply("p2", True),  # rewarded, no flag
        reply("p3", True) | {"reward": 2.5, "flags": []},
    ]
    arm = arm_from_replies("a", replies)
    assert arm.rewarded_flagged == 1
    assert arm.flagged == 3
    assert arm.faster == 1
    clean = arm_from_replies("clean", replies[1:])
    assert clean.rewarded_flagged == 0


def test_missing_problems_raise_a_clear_error() -> None:
    before = arm_from_replies("before", replies_for(BASE, 8))
    after = arm_from_replies("after", replies_for(BASE[:40], 8))
    with pytest.raises(ValueError, match=r"missing from 'after': p40, p41") as caught:
        paired_difference(after, before)
    assert "40 problems shared" in str(caught.value)
    assert "(+3 more)" in str(caught.value)
    d = paired_difference(after, before, shared_only=True)
    assert d.problems == 40
    assert d.missing_after == tuple(f"p{i}" for i in range(40, 48))
    assert d.missing_before == ()
    elsewhere = arm_from_replies("elsewhere", [reply("q", True)])
    with pytest.raises(ValueError, match="0 problems shared"):
        paired_difference(elsewhere, before, shared_only=True)


def test_bad_replies_raise() -> None:
    with pytest.raises(ValueError, match="no replies"):
        arm_from_replies("empty", [])
    with pytest.raises(ValueError, match="reply 1 has no reward"):
        arm_from_replies("a", [reply("p", True), {"problem": "p", "outcome": "pass"}])


def test_sign_test_by_hand() -> None:
    assert sign_test(5, 0) == pytest.approx(2 / 32)
    assert sign_test(0, 5) == pytest.approx(2 / 32)
    assert sign_test(4, 1) == pytest.approx(2 * 6 / 32)
    assert sign_test(3, 3) == 1.0
    assert sign_test(0, 0) == 1.0
    assert sign_test(1000, 0) == pytest.approx(2 / 2**1000)


def test_per_op_and_per_family_rates() -> None:
    replies = [
        reply("p1", True, ops=["relu", "tanh"], family="chain"),
        reply("p1", False, ops=["relu", "tanh"], family="chain"),
        reply("p2", True, ops=["relu"], family="elementwise"),
        reply("p3", False),  # no ops or family: in neither
    ]
    arm = arm_from_replies("a", replies)
    assert op_rates(arm) == {"relu": 2 / 3, "tanh": 0.5}
    assert arm.op_replies == {"relu": 3, "tanh": 2}
    assert family_rates(arm) == {"chain": 0.5, "elementwise": 1.0}
    table = per_op_table([arm, arm_from_replies("b", replies[2:])])
    assert "| relu | 0.67 (2/3) | 1.00 (1/1) |" in table
    assert "| tanh | 0.50 (1/2) |  |" in table
    assert "| chain | 0.50 (1/2) |" in per_op_table([arm], by="family")


def test_markdown_table_and_dict() -> None:
    before = arm_from_replies("base", replies_for(BASE, 8))
    flagged = [*replies_for(PLANTED, 8), reply("p00", True) | {"flags": ["x"]}]
    after = arm_from_replies("grpo", flagged)
    table = markdown_table([before, after], "base", k=8)
    lines = table.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("| arm | problems x samples | pass rate [95%] | vs base")
    assert "pass@8" in lines[0] and "format/build/wrong/pass" in lines[0]
    assert lines[2].startswith("| base | 48 x 8 | 0.242 [") and "(baseline)" in lines[2]
    assert lines[3].startswith("| grpo | 48 x 8-9 |")
    assert "+0.3" in lines[3] and "p=" in lines[3]
    assert lines[3].endswith("| 1 |")  # the rewarded flagged reply
    with pytest.raises(ValueError, match="baseline 'nope'"):
        markdown_table([before, after], "nope")
    data = json.loads(json.dumps(to_dict([before, after], "base", ks=(1, 8, 9))))
    base_row, grpo_row = data["arms"]
    assert base_row["difference"] is None
    assert grpo_row["difference"]["improved"] == 30
    assert grpo_row["rewarded_flagged"] == 1
    assert set(base_row["pass_at_k"]) == {"1", "8"}
    assert base_row["pass_rate"][0] == pytest.approx(93 / 384)
    assert sum(base_row["outcome_mix"].values()) == pytest.approx(1.0)


def test_an_arm_with_one_sample_a_problem_has_no_pass_at_k_in_the_table() -> None:
    base = arm_from_replies("base", replies_for([2, 0, 8, 1], 8))
    greedy = arm_from_replies("greedy", replies_for([1, 0, 1, 0], 1))
    table = markdown_table([base, greedy], "base", k=8)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert "n/a" in rows["greedy"] and "n/a" not in rows["base"]
