"""The ``compile_baseline`` mode: time ``torch.compile(Model)`` against eager ``Model``.

Runs in its own process, which never sees candidate code. Both are timed with the same
interleaved protocol as candidates, and the ratio compile/eager is what the parent caches and
combines with the live eager time of each evaluation (see ``evaluator/checks/compile_ratio.py``).
"""

from __future__ import annotations

import functools
import random
import time

import torch

from cuda_agent.core.records import CompileBaselineRecord
from cuda_agent.evaluator.worker import device_turn
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device import make_device
from cuda_agent.evaluator.worker.kernels import profile_call, summarise_kernels
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure, build_reference
from cuda_agent.evaluator.worker.tensors import clone_nested
from cuda_agent.evaluator.worker.timing import time_interleaved


def run(req: WorkerRequest, channel: ResultChannel) -> CompileBaselineRecord:
    # a shared GPU: the reference and torch.compile's compilation under the shared turn, the
    # timing under the exclusive one (worker/device_turn.py)
    with device_turn.holding(req.lock_path):
        return _measure(req)


def _measure(req: WorkerRequest) -> CompileBaselineRecord:
    torch.set_grad_enabled(False)
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    try:
        ref = build_reference(
            req.problem_source,
            req.seed,
            device,
            verify_trials=1,
            timing_sets=req.settings.timing.input_sets,
        )
    except ProblemFailure as err:
        return _failed("problem", str(err))
    device_turn.current().alone_if_large(device.synchronize)
    eager = ref.model
    start = time.perf_counter()
    try:
        compiled = torch.compile(eager)
        first = compiled(*clone_nested(ref.verify_sets[0]))
        device.synchronize()
    except Exception as err:
        return _failed("compile", f"torch.compile failed: {describe_exception(err)}")
    compile_seconds = time.perf_counter() - start
    check = compare(eager(*clone_nested(ref.verify_sets[0])), first, req.atol, req.rtol)
    device_turn.current().exclusive(device.synchronize)
    outcome = time_interleaved(
        lambda args: compiled(*args),
        lambda args: eager(*args),
        ref.timing_inputs(),
        device,
        req.settings.timing,
        req.atol,
        req.rtol,
        random.Random(req.seed),
    )
    if outcome.failure or outcome.candidate is None or outcome.reference is None:
        return _failed("time", f"timing torch.compile failed: {outcome.failure}")
    profile = None
    if req.settings.profile and device.name == "cuda":
        inputs = ref.timing_inputs()[0]
        activities = profile_call(functools.partial(compiled, *clone_nested(inputs)))
        profile = summarise_kernels(activities, set()).as_dict()
    return CompileBaselineRecord(
        ok=True,
        precision=req.settings.precision,
        profile=profile,
        compile_us=outcome.candidate.median_us,
        eager_us=outcome.reference.median_us,
        ratio=outcome.candidate.median_us / outcome.reference.median_us,
        compile_seconds=round(compile_seconds, 3),
        matches_eager=check.ok,
        timing={
            "compile": outcome.candidate.__dict__,
            "eager": outcome.reference.__dict__,
            "rounds": outcome.rounds,
        },
        device=device.info(),
    )


def _failed(stage: str, message: str) -> CompileBaselineRecord:
    record = CompileBaselineRecord()
    record.fail(stage, message)
    return record
