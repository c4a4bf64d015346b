"""The ``evaluate`` mode: verify a candidate against the pristine reference, then time both.

Order of events (the order is part of the defence):

1. pin the precision policy; build the reference, its weights and all inputs
   (``reference.py``); run the reference once and keep only a fingerprint of its output;
   time one more (warm) call and send it to the parent, which derives the candidate's device
   budget from it (``evaluator/device_budget.py``);
2. snapshot global switches, harness function identities and the thread count;
3. import the candidate (its builds, at import or later, go through the shim) and build
   ``ModelNew`` from the reference's seed, with the reference's weights as the policy says;
4. verification trials (``verify.py``): the candidate runs first on its own clone of fresh
   inputs (no reference output for them exists yet), under the ATen-op recorder; then the
   reference on another clone; outputs compared; inputs, weights and global state checked
   after each call; in the last trial every floating-point input is inside a buffer whose edges
   hold NaN, which the call must leave alone and must not read into its output
   (``red_zones.py``: a read or write past an input's edge); where the policy requires custom
   kernels and Triton launched some, one more call with every launch skipped must not still be
   right (the decoy check); where the policy asks, both models then get the same new parameter
   values and must still agree (``weights.py``);
5. the reference is re-run on trial 0 and must still match the canary;
6. on the GPU, one profiled call records which kernels ran (the candidate's own are those in
   its binaries and the Triton kernels the harness launched); they must take the policy's
   ``min_custom_kernel_coverage`` of the device time (``verify.py``); the parent is then told
   that verification passed (a ``verified`` line with the device and the candidate's kernel
   names), so it can start the memory check and the torch.compile baseline while this
   process times;
7. interleaved timing (``timed.py``, ``timing.py``), with custom-kernel calls counted in every
   round; on the GPU, profiled calls then check that all device work (every stream) fits the
   measured time, and, when asked, one more profiled call of each model gives the kernel
   tables.

This module is the order: ``run`` and the stage sequence. What the stages share is an
``EvaluationSession`` (``session.py``); the correctness stages are in ``verify.py``, the speed
stages in ``timed.py``; what each policy decides is in ``policies.py``.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from cuda_agent.core.records import EvaluationRecord, StageError
from cuda_agent.evaluator.worker import device_turn
from cuda_agent.evaluator.worker.candidate import (
    CandidateFailure,
    import_candidate,
    instantiate,
    problem_namespace,
    request_shim,
)
from cuda_agent.evaluator.worker.census import thread_count
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.device_memory import CONTENTION_FLAG, DeviceContention
from cuda_agent.evaluator.worker.guards import (
    FunctionIdentities,
    GlobalState,
    prime_recorder,
    set_compile_disabled,
)
from cuda_agent.evaluator.worker.policies import (
    NOTE_CUDNN_BENCHMARK,
    NOTE_TIMED_BESIDE_OTHER_JOBS,
    rules,
)
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.problem_lint import lint_reference
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure, Reference, build_reference
from cuda_agent.evaluator.worker.session import (
    EvaluationSession,
    Phases,
    Verdict,
    call,
    solution_files,
)
from cuda_agent.evaluator.worker.tensors import clone_nested, fingerprint_nested
from cuda_agent.evaluator.worker.timed import profile, stream_check, time_candidate
from cuda_agent.evaluator.worker.verify import (
    check_canary,
    decoy_check,
    fallback_note,
    integrity,
    kernel_check,
    own_state,
    verify_trials,
    weight_probe,
    weights_note,
)


def run(req: WorkerRequest, channel: ResultChannel) -> EvaluationRecord:
    result = EvaluationRecord()
    phases = Phases()
    given_up = 0  # times the shared GPU was left to another job while this one compiled
    try:
        # waits for the device's turn are told to the parent: its budget's clock stops
        announce = lambda state: channel.send("turn", state=state)  # noqa: E731
        with device_turn.holding(req.lock_path, announce) as turn:
            if turn.held:
                phases.mark("wait_shared")  # for the device's shared turn (device_turn.py)
            try:
                _evaluate(req, channel, result, phases)
            finally:
                given_up = turn.given_up
    except Verdict as v:
        result.fail(v.stage, str(v), v.flags)
    except ProblemFailure as err:
        result.error = StageError("problem", str(err))
    except DeviceContention as err:  # the device's neighbours took its memory
        result.fail("internal", str(err), [CONTENTION_FLAG])
    except CandidateFailure as err:
        result.error = StageError(err.stage, str(err))
    if result.error is not None and result.error.stage == "build":
        result.compiled = False
    result.worker_phases_s = phases.seconds
    result.device_turns_given_up = given_up or None
    result.ok = result.error is None
    return result


def _evaluate(
    req: WorkerRequest, channel: ResultChannel, result: EvaluationRecord, phases: Phases
) -> None:
    """Steps 1 and 2 (the reference, the snapshots, the shim), then the candidate's stages."""
    torch.set_grad_enabled(False)
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    result.device = device.info()
    result.precision = req.settings.precision
    channel.send("stage", stage="load")
    timing_sets = req.settings.timing.input_sets if req.settings.timing.enabled else 0
    ref = build_reference(req.problem_source, req.seed, device, req.settings.trials, timing_sets)
    result.warnings.extend(ref.notes)
    canary = fingerprint_nested(call(ref.model, clone_nested(ref.verify_sets[0])))
    ref.exclude_own_updates()  # BatchNorm's running statistics, in training mode
    result.module_mode = ref.module_mode
    device.synchronize()
    channel.send("reference", call_s=_reference_call_s(ref, device))  # before candidate code
    phases.mark("reference_and_inputs")
    if device_turn.current().alone_if_large(device.synchronize):
        phases.mark("wait_exclusive")
    if req.problem_lint:  # the parent has no cached lint of this problem (checks/task_lint.py)
        result.problem_lint = lint_reference(ref, req.seed, req.atol, req.rtol, device)
        phases.mark("problem_lint")
    prime_recorder()
    policy = rules(req.settings.policy)
    set_compile_disabled(policy.compile_disabled)
    shim = request_shim(req)  # before any snapshot: it may import Triton
    state = GlobalState(policy.tolerated_switches)
    watched = shim.triton.watched() if shim.triton is not None else ()
    identities = FunctionIdentities(extra=watched)
    device_turn.current().mark_baseline()
    shim.install()
    try:
        session = EvaluationSession(
            req=req,
            channel=channel,
            result=result,
            phases=phases,
            device=device,
            ref=ref,
            canary=canary,
            rules=policy,
            shim=shim,
            state=state,
            identities=identities,
            threads_before=thread_count(),
            files=solution_files(req),
        )
        _candidate_stages(session)
    finally:
        result.builds = [b.to_dict() for b in shim.builds]
        if shim.failure is not None and not shim.module_paths:
            result.compiled = False  # nothing the solution built could be loaded
        if "cudnn_benchmark" in state.tolerated_seen:
            result.note(
                NOTE_CUDNN_BENCHMARK,
                "ModelNew set torch.backends.cudnn.benchmark; the policy allows it, and the "
                "switch was restored after every call (the reference and the baselines run "
                "with the pinned settings)",
            )


def _candidate_stages(s: EvaluationSession) -> None:
    """Steps 3 to 7, in their order."""
    req, result, phases, ref, device, shim = s.req, s.result, s.phases, s.ref, s.device, s.shim
    model_new = import_candidate(
        req.solution_kind,
        Path(req.solution_root),
        req.solution_entry,
        req.prebuilt_module,
        shim,
        problem_namespace(req, ref, s.rules),
    )
    result.compiled = True
    integrity(s, where="while importing the candidate")
    s.instance = instantiate(
        model_new,
        ref.init_args,
        ref.init_seed,
        ref.state,
        device,
        s.files,
        shim,
        strict_weights=s.rules.strict_weights,
        on_host=ref.built_on_host,
    )
    cand_weights = own_state(s.cand, ref)
    phases.mark("import_candidate")

    s.channel.send("stage", stage="verify")
    trials, ops = verify_trials(s, cand_weights)
    result.verify = {"trials": trials, "ops": dict(sorted(ops.items()))}
    result.custom_calls_per_forward = shim.usage.calls / max(1, len(ref.verify_sets))
    if shim.triton is not None and shim.triton.launches and s.rules.custom_kernel_required:
        decoy_check(s)
    if s.rules.weight_probe:
        weight_probe(s)
    weights_note(s)
    fallback_note(s)
    check_canary(s)
    phases.mark("verify")
    turn = device_turn.current()
    if turn.mode == "shared" and (device.name == "cuda" or req.settings.timing.enabled):
        # the device alone for everything that measures time
        if not turn.exclusive(device.synchronize):
            result.note(
                NOTE_TIMED_BESIDE_OTHER_JOBS,
                "something of the candidate (a thread, a child process or a hook) was still "
                "active after verification, so it kept the GPU's shared turn and was timed "
                "beside other jobs' verification; its times may read high",
            )
        phases.mark("wait_exclusive")
    if device.name == "cuda":
        kernel_check(s)
        s.threads_before = thread_count()  # the profiler starts threads of its own
        phases.mark("kernel_record")
    result.correct = True
    s.channel.send("verified", device=result.device, kernel_symbols=result.kernel_symbols)

    if req.settings.timing.enabled:
        s.channel.send("stage", stage="time")
        time_candidate(s)
        phases.mark("time")
        if device.name == "cuda":
            stream_check(s)
            phases.mark("stream_check")
    if req.settings.profile and device.name == "cuda":
        s.channel.send("stage", stage="profile")
        profile(s)
        phases.mark("profile")


def _reference_call_s(ref: Reference, device: Device) -> float:
    """Seconds of one warm, synchronised reference call: the parent derives the candidate's
    device budget from it (``evaluator/device_budget.py``)."""
    args = clone_nested(ref.verify_sets[0])
    began = time.perf_counter()
    call(ref.model, args)
    device.synchronize()
    return round(time.perf_counter() - began, 6)
