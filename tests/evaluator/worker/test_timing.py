"""The interleaved timer's integrity hook (when it asks for the expensive checks, and that a
change made late in timing, even in the very last round, is still caught), its inputs (no
timed call sees inputs an earlier call saw) and its stop test (running moments that agree
with the full statistics, which are computed once, not every round)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from cuda_agent.evaluator.worker import timing
from cuda_agent.evaluator.worker.device import CpuDevice
from cuda_agent.evaluator.worker.protocol import MAX_TIMED_ROUNDS, TimingOptions
from cuda_agent.evaluator.worker.timing import RunningMoments, SampleStats, time_interleaved

ROUNDS = 12


def fixed_rounds(check_fraction: float) -> TimingOptions:
    """Exactly ROUNDS rounds: convergence is impossible (target 0), no time cap in reach."""
    return TimingOptions(
        warmup_ms=0.0,
        warmup_calls=1,
        min_rounds=ROUNDS,
        max_rounds=ROUNDS,
        max_seconds=60.0,
        target_rse=0.0,
        input_sets=2,
        check_fraction=check_fraction,
    )


def double(args: list[torch.Tensor]) -> torch.Tensor:
    return args[0] * 2


def sets() -> list[list[torch.Tensor]]:
    return [[torch.randn(64)] for _ in range(2)]


def test_thorough_checks_fall_on_checked_rounds_and_after_the_last() -> None:
    asked: list[bool] = []

    def after_call(thorough: bool) -> list[str]:
        asked.append(thorough)
        return []

    outcome = time_interleaved(
        double,
        double,
        sets(),
        CpuDevice(),
        fixed_rounds(0.3),
        0.0,
        0.0,
        random.Random(0),
        after_call,
    )
    assert outcome.failure is None and outcome.rounds == ROUNDS
    assert asked[0] is True  # the first round is always checked
    assert asked[-1] is True  # the state after the last round is always fingerprinted
    per_round = asked[:ROUNDS]
    assert sum(per_round) == outcome.checked_rounds
    assert len(asked) == ROUNDS + (0 if per_round[-1] else 1)


def test_a_change_in_the_last_round_is_caught_even_when_that_round_is_not_checked() -> None:
    calls = 0
    tampered = False

    def candidate(args: list[torch.Tensor]) -> torch.Tensor:
        nonlocal calls, tampered
        calls += 1
        if calls == 1 + ROUNDS:  # one warm-up call, then the last timed call
            tampered = True
        return double(args)

    def after_call(thorough: bool) -> list[str]:
        return ["reference_weights_mutated"] if thorough and tampered else []

    outcome = time_interleaved(
        candidate,
        double,
        sets(),
        CpuDevice(),
        fixed_rounds(0.0),
        0.0,
        0.0,
        random.Random(0),
        after_call,
    )  # check_fraction 0: only the first round is checked
    assert calls == 1 + ROUNDS
    assert outcome.failure and "reference_weights_mutated" in outcome.failure
    assert outcome.flags == ["reference_weights_mutated"]


def test_cheap_checks_run_every_round() -> None:
    asked: list[bool] = []

    def after_call(thorough: bool) -> list[str]:
        asked.append(thorough)
        return ["threads_started"] if len(asked) == 4 else []

    outcome = time_interleaved(
        double,
        double,
        sets(),
        CpuDevice(),
        fixed_rounds(0.0),
        0.0,
        0.0,
        random.Random(0),
        after_call,
    )
    assert outcome.flags == ["threads_started"] and outcome.rounds == 3


def test_no_timed_call_sees_an_element_value_an_earlier_call_saw() -> None:
    """The most rounds a run may have, after a long warm-up: every timed call's inputs differ
    from every earlier call's in every element, so a cache keyed on content, even on one
    sampled element, never hits (a content cache once hit when two rounds' factors rounded to
    the same float32 value, and an honest fixture was rejected)."""
    warm_up = 500
    seen: set[tuple[int, float]] = set()
    repeats: list[int] = []
    calls = 0

    def candidate(args: list[torch.Tensor]) -> torch.Tensor:
        nonlocal calls
        calls += 1
        values = set(enumerate(args[0].tolist()))
        if calls > warm_up and values & seen:
            repeats.append(calls)
        seen.update(values)
        return double(args)

    opts = TimingOptions(
        warmup_ms=0.0,
        warmup_calls=warm_up,
        min_rounds=MAX_TIMED_ROUNDS,
        max_rounds=MAX_TIMED_ROUNDS,
        max_seconds=600.0,
        target_rse=0.0,
        input_sets=1,
        check_fraction=0.0,
        flush_cache=False,
    )
    outcome = time_interleaved(
        candidate, double, sets()[:1], CpuDevice(), opts, 0.0, 0.0, random.Random(0)
    )
    assert outcome.rounds == MAX_TIMED_ROUNDS and calls == warm_up + MAX_TIMED_ROUNDS
    assert repeats == []


@pytest.mark.parametrize("scale", [1e-3, 11.0, 4e6])
def test_running_moments_agree_with_the_full_statistics(scale: float) -> None:
    rng = random.Random(7)
    moments = RunningMoments()
    samples: list[float] = []
    for _ in range(300):
        sample = scale * (1.0 + 0.2 * rng.random()) + (scale if rng.random() < 0.02 else 0.0)
        samples.append(sample)
        moments.add(sample)
        if len(samples) < 2:
            assert moments.rse == math.inf == SampleStats.of(samples).rse
            continue
        assert math.isclose(moments.rse, SampleStats.of(samples).rse, rel_tol=1e-9)
    constant = RunningMoments()
    for _ in range(5):
        constant.add(3.0)
    assert constant.rse == 0.0 == SampleStats.of([3.0] * 5).rse


def test_the_stop_test_reads_running_moments_not_the_full_statistics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long run computes the full statistics of each side once, at the end: recomputing them
    every round costs O(rounds²) (2.6 s of a 1,600-round run). It still stops once both sides
    have converged, and the figures it reports are those of all its samples."""
    computed: list[int] = []
    full = SampleStats.of

    def counted(samples: list[float]) -> SampleStats:
        computed.append(len(samples))
        return full(samples)

    monkeypatch.setattr(timing.SampleStats, "of", staticmethod(counted))

    def run(target_rse: float) -> timing.TimingOutcome:
        options = TimingOptions(
            warmup_ms=0.0, warmup_calls=1, min_rounds=10, max_rounds=400, max_seconds=600.0,
            target_rse=target_rse, input_sets=2, check_fraction=0.0, flush_cache=False,
        )  # fmt: skip
        return time_interleaved(
            double, double, sets(), CpuDevice(), options, 0.0, 0.0, random.Random(0)
        )

    outcome = run(target_rse=0.0)  # never converges
    assert outcome.stop_reason == "max_rounds" and outcome.rounds == 400
    assert computed == [400, 400]
    assert outcome.candidate is not None and outcome.candidate.n == 400
    computed.clear()
    outcome = run(target_rse=1e9)  # converges as soon as it may
    assert outcome.stop_reason == "converged" and outcome.rounds == 10
    assert computed == [10, 10]
