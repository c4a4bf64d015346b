"""Interleaved, adaptive timing of candidate vs reference on rotating input sets.

Protocol (one round = one call of each side, order alternating A B / B A):

* every round draws one of several input sets (rotating) and scales its floating tensors by a
  factor near 1 that no other call of the run gets (``Factors``), and each call gets its own
  clone, so caching on pointers or content across calls does not pay; all of this happens
  outside the timed region;
* the device's cache is flushed before every timed call;
* warm-up by time (``warmup_ms`` and ``warmup_calls`` for each side) before any sample;
* a random subset of rounds (``check_fraction``, plus the first) compares the candidate's
  timed output with the reference's output for the same inputs, so a candidate that behaves
  only when checked is caught; the subset is drawn from the operating system's randomness
  (``random.SystemRandom``), which keeps no state in the process for a candidate to read;
* ``after_call`` runs after every round: cheap checks each time, and the expensive ones
  (fingerprints of every pristine tensor) on the checked rounds and once more after the last
  round, so a tampering candidate cannot tell when it is watched and any lasting change is
  caught, at a cost that does not grow with the number of rounds;
* stop once both sides' relative standard error is below ``target_rse`` (after
  ``min_rounds``), or at ``max_rounds`` / ``max_seconds``. The stop test reads running moments
  (``RunningMoments``: constant work per round); the full statistics are computed once, at the
  end. (Recomputing them every round cost O(rounds²): 2.6 of the 4 s that a 1,600-round run of
  an 11 us cpu kernel took, 2026-12-07.)

Reported per side: median (the figure used for speed-ups), mean, standard deviation, quartiles,
minimum, sample count and relative standard error.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.protocol import MAX_TIMED_ROUNDS, TimingOptions
from cuda_agent.evaluator.worker.tensors import clone_nested, map_tensors


@dataclass
class SampleStats:
    median_us: float
    mean_us: float
    std_us: float
    p25_us: float
    p75_us: float
    min_us: float
    n: int
    rse: float

    @classmethod
    def of(cls, samples: list[float]) -> SampleStats:
        n = len(samples)
        mean = statistics.fmean(samples)
        std = statistics.stdev(samples) if n > 1 else 0.0
        quart = statistics.quantiles(samples, n=4) if n > 1 else [samples[0]] * 3
        return cls(
            median_us=statistics.median(samples),
            mean_us=mean,
            std_us=std,
            p25_us=quart[0],
            p75_us=quart[2],
            min_us=min(samples),
            n=n,
            rse=relative_standard_error(std, mean, n),
        )


def relative_standard_error(std: float, mean: float, n: int) -> float:
    """The standard error of the mean over the mean: infinite below two samples or for a mean
    of zero or less (the stop test waits for more rounds)."""
    return std / math.sqrt(n) / mean if mean > 0 and n > 1 else math.inf


class RunningMoments:
    """The mean and sample variance of a growing series of samples in constant work per sample
    (Welford's update), for the stop test; ``rse`` is ``SampleStats.of(samples).rse`` up to
    rounding."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self._squares = 0.0  # the sum of squared deviations from the running mean

    def add(self, sample: float) -> None:
        self.n += 1
        delta = sample - self.mean
        self.mean += delta / self.n
        self._squares += delta * (sample - self.mean)

    @property
    def rse(self) -> float:
        std = math.sqrt(max(self._squares, 0.0) / (self.n - 1)) if self.n > 1 else 0.0
        return relative_standard_error(std, self.mean, self.n)


@dataclass
class TimingOutcome:
    candidate: SampleStats | None = None
    reference: SampleStats | None = None
    rounds: int = 0
    checked_rounds: int = 0
    seconds: float = 0.0
    stop_reason: str = ""
    failure: str | None = None
    flags: list[str] = field(default_factory=list)


Side = Callable[[Any], Any]


def time_interleaved(
    candidate: Side,
    reference: Side,
    input_sets: list[Any],
    device: Device,
    opts: TimingOptions,
    atol: float,
    rtol: float,
    rng: random.Random,
    after_call: Callable[[bool], list[str]] | None = None,
) -> TimingOutcome:
    """Time ``candidate(inputs)`` against ``reference(inputs)``; see the module docstring.

    ``after_call(thorough)`` returns integrity flags (empty when all is well); ``thorough``
    asks for the expensive checks too.
    """
    outcome = TimingOutcome()
    watcher = random.SystemRandom()
    factors = Factors(rng)
    start = time.monotonic()
    _warm_up(candidate, reference, input_sets, device, opts, factors)
    samples: dict[str, list[float]] = {"cand": [], "ref": []}
    moments = {"cand": RunningMoments(), "ref": RunningMoments()}
    round_no = 0
    while True:
        inputs = perturbed(input_sets[round_no % len(input_sets)], factors.timed())
        check = watcher.random() < opts.check_fraction or round_no == 0
        first_cand = round_no % 2 == 0
        results: dict[str, Any] = {}
        for side in ("cand", "ref") if first_cand else ("ref", "cand"):
            fn = candidate if side == "cand" else reference
            args = clone_nested(inputs)
            if opts.flush_cache:
                device.flush_cache()
            device.synchronize()
            elapsed, out = device.time_call(functools.partial(fn, args))
            samples[side].append(elapsed)
            moments[side].add(elapsed)
            if check:
                results[side] = out
            del out
        if after_call is not None and _tampered(after_call, check, outcome):
            break
        if check:
            outcome.checked_rounds += 1
            verdict = compare(results["ref"], results["cand"], atol, rtol)
            if not verdict.ok:
                outcome.flags.append("timed_output_mismatch")
                outcome.failure = (
                    f"a timed call (round {round_no + 1}) returned a wrong result: "
                    f"{verdict.message}"
                )
                break
        results.clear()
        round_no += 1
        elapsed_total = time.monotonic() - start
        if round_no >= opts.min_rounds and all(
            side.rse < opts.target_rse for side in moments.values()
        ):
            outcome.stop_reason = "converged"
            break
        if round_no >= opts.max_rounds:
            outcome.stop_reason = "max_rounds"
            break
        if elapsed_total > opts.max_seconds and round_no >= 3:
            outcome.stop_reason = "time_cap"
            break
    if after_call is not None and not outcome.failure and not check:
        _tampered(after_call, True, outcome)
    outcome.rounds = round_no
    outcome.seconds = time.monotonic() - start
    if samples["cand"] and samples["ref"]:
        outcome.candidate = SampleStats.of(samples["cand"])
        outcome.reference = SampleStats.of(samples["ref"])
    return outcome


def _tampered(
    after_call: Callable[[bool], list[str]], thorough: bool, outcome: TimingOutcome
) -> bool:
    flags = after_call(thorough)
    if flags:
        outcome.flags.extend(flags)
        outcome.failure = f"integrity check failed during timing: {', '.join(flags)}"
    return bool(flags)


FACTOR_STEP = 2.0**-22  # factors are 1 + k * FACTOR_STEP for an integer k with |k| < FACTOR_SPAN
FACTOR_SPAN = (
    MAX_TIMED_ROUNDS  # the odd k in (-SPAN, SPAN) are as many; factors stay within 2**-10 of 1
)


class Factors:
    """The scale factors of one timing run: each timed round's is used by no other call.

    ``1 + k * FACTOR_STEP`` is exact in float32 and float64. Two factors with different ``k``
    differ by at least 2**-22 relative, two units in the last place of float32, so they give
    different float32 (and float64) values for every normal nonzero element: every timed round's
    inputs differ from every earlier call's, and a cache keyed on content, even on one sampled
    element, never hits. Timed rounds take the odd ``k``, each once, in an order drawn from the
    run's seeded ``rng``; warm-up calls take the even nonzero ``k`` (cycled); verification's
    inputs are unscaled (``k`` = 0). Half-precision tensors are coarser than the step: scaling
    changes few of their elements (a cache that then skips the kernel is still caught by the
    custom-call count, ``custom_kernel_skipped_in_timing``).
    """

    def __init__(self, rng: random.Random) -> None:
        odd = list(range(1 - FACTOR_SPAN, FACTOR_SPAN, 2))
        self._timed = iter(rng.sample(odd, len(odd)))
        even = [k for k in range(2 - FACTOR_SPAN, FACTOR_SPAN, 2) if k]
        self._warm_up = itertools.cycle(random.Random(len(even)).sample(even, len(even)))

    def timed(self) -> float:
        """The next timed round's factor (``StopIteration`` after ``MAX_TIMED_ROUNDS`` rounds)."""
        return 1.0 + next(self._timed) * FACTOR_STEP

    def warm_up(self) -> float:
        return 1.0 + next(self._warm_up) * FACTOR_STEP


def perturbed(inputs: Any, factor: float) -> Any:
    """A copy of ``inputs`` with every floating tensor scaled by ``factor`` (see ``Factors``);
    signs, zeros and ordering survive."""
    return map_tensors(inputs, lambda t: t.mul(factor) if t.is_floating_point() else t.clone())


def _warm_up(
    candidate: Side,
    reference: Side,
    input_sets: list[Any],
    device: Device,
    opts: TimingOptions,
    factors: Factors,
) -> None:
    for fn in (candidate, reference):
        spent, calls = 0.0, 0
        deadline = time.monotonic() + max(5.0, opts.max_seconds)
        while (
            spent * 1000.0 < opts.warmup_ms or calls < opts.warmup_calls
        ) and time.monotonic() < deadline:
            args = perturbed(input_sets[calls % len(input_sets)], factors.warm_up())
            t0 = time.perf_counter()
            fn(args)
            device.synchronize()
            spent += time.perf_counter() - t0
            calls += 1
