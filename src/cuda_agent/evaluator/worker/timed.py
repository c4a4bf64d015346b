"""The ``evaluate`` mode's speed stages, after verification (step 7 of its order,
``modes/evaluate.py``).

* ``time_candidate``: interleaved timing of candidate and reference (``timing.py`` runs the
  rounds), with the integrity checks after candidate calls and custom-kernel calls counted in
  every timed call where the policy requires them;
* ``stream_check``: on the GPU, profiled calls: all the device work of a candidate call (every
  stream) must fit in the time CUDA events measured, the reference profiled alongside as a
  control for clock drift; a gap is looked at a second time, each profiled call beside an
  event-timed one, before it is flagged (foreign work on a shared device widens the first);
* ``profile``: on the GPU, when asked, the kernel tables of one candidate and one reference
  call (``details.profile``).

What it does not do: judge correctness (``verify.py``; the checked timed calls compare outputs
inside ``timing.py``), decide the order of the stages (``modes/evaluate.py``), or decide what a
policy requires (it reads ``session.rules``).
"""

from __future__ import annotations

import functools
import random
import statistics
from typing import Any

from cuda_agent.evaluator.worker import triton_launches
from cuda_agent.evaluator.worker.kernels import (
    busy_us,
    candidate_kernel_names,
    profile_call,
    summarise_kernels,
)
from cuda_agent.evaluator.worker.session import EvaluationSession, Verdict, call, solution_files
from cuda_agent.evaluator.worker.tensors import clone_nested
from cuda_agent.evaluator.worker.timing import time_interleaved
from cuda_agent.evaluator.worker.verify import integrity, raised

STREAM_SLACK = 1.15  # device work may exceed the event time by 15% + 20 us (profiler jitter)
STREAM_SLACK_US = 20.0
MAX_CLOCK_DRIFT = 1.25  # the most the reference's own profiled/timed ratio may widen the slack


def time_candidate(s: EvaluationSession) -> None:
    """Time candidate and reference (``result.runtime_us``, ``eager_us``, ``timing``)."""
    req, ref, cand, shim, result = s.req, s.ref, s.cand, s.shim, s.result
    skipped = 0

    files = solution_files(req)

    def run_candidate(args: list[Any]) -> Any:
        nonlocal skipped
        before = shim.usage.calls
        try:
            out = call(cand, args)
        except Exception as err:
            raise raised(s, err, files, "time", "a timed call of ModelNew.forward") from None
        if shim.usage.calls == before:
            skipped += 1
        return out

    def after_call(thorough: bool) -> list[str]:
        try:
            integrity(s, where="during timing", tensors=thorough)
        except Verdict as v:
            return v.flags
        return []

    outcome = time_interleaved(
        run_candidate,
        lambda args: call(ref.model, args),
        ref.timing_inputs(),
        s.device,
        req.settings.timing,
        req.atol,
        req.rtol,
        random.Random(req.seed),
        after_call,
    )
    if outcome.failure:
        raise Verdict("time", outcome.failure, outcome.flags)
    assert outcome.candidate is not None and outcome.reference is not None
    required = s.rules.custom_kernel_required
    if required and (result.custom_calls_per_forward or 0) > 0 and skipped:
        raise Verdict(
            "time",
            f"custom kernels ran during verification but not in {skipped} timed call(s)",
            ["custom_kernel_skipped_in_timing"],
        )
    result.runtime_us = outcome.candidate.median_us
    result.eager_us = outcome.reference.median_us
    result.timing = {
        "candidate": outcome.candidate.__dict__,
        "reference": outcome.reference.__dict__,
        "rounds": outcome.rounds,
        "checked_rounds": outcome.checked_rounds,
        "seconds": round(outcome.seconds, 3),
        "stop_reason": outcome.stop_reason,
    }


def stream_check(s: EvaluationSession) -> None:
    """Device work of a call (all streams, CUPTI) must fit in the time CUDA events measured.

    The reference is profiled alongside (calls alternate) as a control: when the device runs
    slower now than while timing (clocks drop under a long compute-bound load), its profiled
    time exceeds its timed median by the same factor, and the candidate's allowance grows by
    that factor, up to ``MAX_CLOCK_DRIFT``.
    """
    ref, result = s.ref, s.result
    busy: dict[str, list[float]] = {"cand": [], "ref": []}
    for j in range(3):
        for side, model in (("cand", s.cand), ("ref", ref.model)):
            args = clone_nested(ref.timing_inputs()[j % len(ref.timing_inputs())])
            s.device.flush_cache()
            busy[side].append(busy_us(profile_call(functools.partial(call, model, args))))
    assert result.runtime_us is not None and result.eager_us is not None
    assert result.timing is not None  # the stream check follows the timing
    measured = result.runtime_us
    profiled = statistics.median(busy["cand"])
    control = statistics.median(busy["ref"])
    drift = min(MAX_CLOCK_DRIFT, max(1.0, control / result.eager_us))
    result.timing["profiler_busy_us"] = round(profiled, 3)
    result.timing["profiler_busy_reference_us"] = round(control, 3)
    if profiled <= measured * drift * STREAM_SLACK + STREAM_SLACK_US:
        return
    # a second look before blaming the candidate: the timed median and the profiled calls came
    # minutes apart, and another process's work on the device between them widens the gap;
    # now each profiled call follows an event-timed call of the same inputs, seconds apart
    profiled, measured = second_look(s)
    result.timing["stream_check_second_look"] = {
        "profiler_busy_us": round(profiled, 3),
        "event_us": round(measured, 3),
    }
    if profiled > measured * STREAM_SLACK + STREAM_SLACK_US:
        raise Verdict(
            "time",
            f"the GPU was busy {profiled:.1f} us per call (all streams) but the timed stream "
            f"only {measured:.1f} us (twice, the second time with each profiled call beside an "
            "event-timed one): work escaped the timed stream; make the launch stream wait "
            "for every stream you use",
            ["work_outside_timed_stream"],
        )


def second_look(s: EvaluationSession) -> tuple[float, float]:
    """(median busy us of profiled candidate calls, median event-timed us of calls made just
    before each on the same inputs), three pairs."""
    busy, timed = [], []
    inputs = s.ref.timing_inputs()
    for j in range(3):
        s.device.flush_cache()
        elapsed, _ = s.device.time_call(
            functools.partial(call, s.cand, clone_nested(inputs[j % len(inputs)]))
        )
        timed.append(elapsed)
        s.device.flush_cache()
        args = clone_nested(inputs[j % len(inputs)])
        busy.append(busy_us(profile_call(functools.partial(call, s.cand, args))))
    return statistics.median(busy), statistics.median(timed)


def profile(s: EvaluationSession) -> None:
    """The kernel tables of one candidate call and one reference call (``result.profile``)."""
    ref, shim = s.ref, s.shim
    inputs = ref.timing_inputs()[0]
    activities = profile_call(functools.partial(call, s.cand, clone_nested(inputs)))
    names = candidate_kernel_names(shim.module_paths, triton_launches.kernel_names(shim.triton))
    s.result.profile = {
        "candidate": summarise_kernels(activities, names).as_dict(),
        "eager": summarise_kernels(
            profile_call(functools.partial(call, ref.model, clone_nested(inputs))), set()
        ).as_dict(),
    }
