"""The ``evaluate`` mode: verify a candidate against the pristine reference, then time both.

Order of events (the order is part of the defence):

1. pin the precision policy; build the reference, its weights and all inputs
   (``reference.py``); run the reference once and keep only a fingerprint of its output;
   time one more (warm) call and send it to the parent, which derives the candidate's device
   budget from it (``evaluator/device_budget.py``);
2. snapshot global switches, harness function identities and the thread count;
3. import the candidate (its builds, at import or later, go through the shim) and build
   ``ModelNew`` from the reference's seed, with the reference's weights as the policy says;
4. verification trials: the candidate runs first on its own clone of fresh inputs (no
   reference output for them exists yet), under the ATen-op recorder; then the reference on
   another clone; outputs compared; inputs, weights and global state checked after each call;
   where the policy asks, both models then get the same new parameter values and must still
   agree (``weights.py``);
5. the reference is re-run on trial 0 and must still match the canary;
6. on the GPU, one profiled call records which kernels ran (the candidate's own are those in
   its binaries);
7. interleaved timing (``timing.py``), with custom-kernel calls counted in every round; on the
   GPU, profiled calls then check that all device work (every stream) fits the measured time.
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.evaluator.worker import device_turn, triton_launches
from cuda_agent.evaluator.worker.candidate import (
    CandidateFailure,
    Instance,
    failed_build,
    import_candidate,
    instantiate,
    request_shim,
)
from cuda_agent.evaluator.worker.census import (
    child_process_count,
    newest_thread_names,
    settled_thread_count,
    thread_count,
)
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.guards import (
    FunctionIdentities,
    GlobalState,
    OpRecorder,
    forbidden_ops,
    prime_recorder,
    set_compile_disabled,
)
from cuda_agent.evaluator.worker.kernels import (
    busy_us,
    candidate_kernel_names,
    profile_call,
    summarise_kernels,
)
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.policies import (
    NOTE_BUILD_FAILED_CAUGHT,
    NOTE_CUDNN_BENCHMARK,
    NOTE_DECOY_CHECK_SKIPPED,
    NOTE_WEIGHTS_NOT_TRANSFERRED,
    PolicyRules,
    rules,
)
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.problem_lint import lint_reference
from cuda_agent.evaluator.worker.protocol import EvaluationRecord, ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure, Reference, build_reference
from cuda_agent.evaluator.worker.shim import BuildShim
from cuda_agent.evaluator.worker.tensors import clone_nested, derive_seed, fingerprint_nested
from cuda_agent.evaluator.worker.timing import time_interleaved
from cuda_agent.evaluator.worker.weights import (
    not_transferred_text,
    probe_pairs,
    same_new_weights,
)

KERNELBENCH_MIN_COVERAGE = 0.01  # custom kernels' share of device time under `kernelbench`
STREAM_SLACK = 1.15  # device work may exceed the event time by 15% + 20 us (profiler jitter)
STREAM_SLACK_US = 20.0
MAX_CLOCK_DRIFT = 1.25  # the most the reference's own profiled/timed ratio may widen the slack


class Verdict(Exception):
    """Stops the evaluation with a failing verdict at ``stage``."""

    def __init__(self, stage: str, message: str, flags: list[str] | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.flags = flags or []


class Phases:
    """Wall-clock seconds per phase of the worker (reported in ``details.worker_phases_s``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 4)
        self._last = now


def run(req: WorkerRequest, channel: ResultChannel) -> dict[str, Any]:
    result = EvaluationRecord()
    phases = Phases()
    given_up = 0  # times the shared GPU was left to another job while this one compiled
    try:
        with device_turn.holding(req.lock_path) as turn:
            try:
                _evaluate(req, channel, result, phases)
            finally:
                given_up = turn.given_up
    except Verdict as v:
        result.fail(v.stage, str(v), v.flags)
    except ProblemFailure as err:
        result.error = {"stage": "problem", "message": str(err)}
    except CandidateFailure as err:
        result.error = {"stage": err.stage, "message": str(err)}
    if result.error is not None and result.error.get("stage") == "build":
        result.compiled = False
    result.worker_phases_s = phases.seconds
    result.device_turns_given_up = given_up or None
    return result.to_dict()


def _evaluate(
    req: WorkerRequest, channel: ResultChannel, result: EvaluationRecord, phases: Phases
) -> None:
    torch.set_grad_enabled(False)
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    result.device = device.info()
    result.precision = req.settings.precision
    channel.send("stage", stage="load")
    timing_sets = req.settings.timing.input_sets if req.settings.timing.enabled else 0
    ref = build_reference(req.problem_source, req.seed, device, req.settings.trials, timing_sets)
    result.warnings.extend(ref.notes)
    canary = fingerprint_nested(_call(ref.model, clone_nested(ref.verify_sets[0])))
    ref.exclude_own_updates()  # BatchNorm's running statistics, in training mode
    result.module_mode = ref.module_mode
    device.synchronize()
    channel.send("reference", call_s=_reference_call_s(ref, device))  # before candidate code
    phases.mark("reference_and_inputs")
    if req.problem_lint:  # the parent has no cached lint of this problem (problem_lint.py)
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
        _candidate_stages(
            req, channel, result, phases, ref, canary, device, shim, state, identities, policy
        )
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


def _candidate_stages(
    req: WorkerRequest,
    channel: ResultChannel,
    result: EvaluationRecord,
    phases: Phases,
    ref: Reference,
    canary: list[tuple[int, ...]],
    device: Device,
    shim: BuildShim,
    state: GlobalState,
    identities: FunctionIdentities,
    policy: PolicyRules,
) -> None:
    threads_before = thread_count()
    root = Path(req.solution_root)
    files = tuple(str(p) for p in root.rglob("*.py"))
    model_new = import_candidate(
        req.solution_kind, root, req.solution_entry, req.prebuilt_module, shim
    )
    result.compiled = True
    _integrity(ref, state, identities, threads_before, where="while importing the candidate")
    instance = instantiate(
        model_new,
        ref.init_args,
        ref.init_seed,
        ref.state,
        device,
        files,
        shim,
        strict_weights=policy.strict_weights,
        on_host=ref.built_on_host,
    )
    cand = instance.model
    cand_weights = _own_state(cand, ref)
    phases.mark("import_candidate")

    channel.send("stage", stage="verify")
    trials, ops = _verify(
        req, ref, cand, device, shim, state, identities, threads_before, cand_weights, files
    )
    result.verify = {"trials": trials, "ops": dict(sorted(ops.items()))}
    result.custom_calls_per_forward = shim.usage.calls / max(1, len(ref.verify_sets))
    if shim.triton is not None and shim.triton.launches and policy.custom_kernel_required:
        _decoy_check(req, ref, cand, device, shim, state, identities, threads_before, result)
    if policy.weight_probe:
        _weight_probe(req, ref, instance, device, shim, state, identities, threads_before, result)
    _weights_note(ref, instance, result)
    _fallback_note(shim, result)
    _check_canary(ref, canary, result)
    phases.mark("verify")
    if device.name == "cuda":
        _kernel_check(req, ref, cand, shim, result)
        threads_before = thread_count()  # the profiler starts threads of its own
        phases.mark("kernel_record")
    result.correct = True

    if req.settings.timing.enabled:
        channel.send("stage", stage="time")
        _time(req, ref, cand, device, shim, state, identities, threads_before, result)
        phases.mark("time")
        if device.name == "cuda":
            _stream_check(req, ref, cand, device, result)
            phases.mark("stream_check")
    if req.settings.profile and device.name == "cuda":
        channel.send("stage", stage="profile")
        _profile(ref, cand, shim, result)
        phases.mark("profile")


def _verify(
    req: WorkerRequest,
    ref: Reference,
    cand: torch.nn.Module,
    device: Device,
    shim: BuildShim,
    state: GlobalState,
    identities: FunctionIdentities,
    threads_before: int,
    cand_weights: list[tuple[int, ...]],
    files: tuple[str, ...],
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    trials = []
    all_ops: dict[str, int] = {}
    for k, inputs in enumerate(ref.verify_sets):
        cand_in = clone_nested(inputs)
        calls_before = shim.usage.calls
        recorder = OpRecorder()
        try:
            with recorder:
                out = _call(cand, cand_in)
            device.synchronize()
        except Exception as err:
            raise _raised(err, shim, files, "verify", f"trial {k + 1}: ModelNew.forward") from None
        snapshot = clone_nested(out)
        del out
        for op, n in recorder.ops.items():
            all_ops[op] = all_ops.get(op, 0) + n
        _integrity(
            ref, state, identities, threads_before, where=f"during trial {k + 1}", inputs=False
        )
        _policy(req.settings.policy, recorder, shim.usage.calls - calls_before, shim.failure)
        if _own_state(cand, ref) != cand_weights:
            raise Verdict(
                "verify",
                f"trial {k + 1}: ModelNew changed its own parameters or buffers during forward",
                ["param_mutated"],
            )
        ref_in = clone_nested(inputs)
        if not ref.set_intact(k):  # both sides' copies were made from what it holds now
            raise Verdict(
                "verify",
                f"trial {k + 1}: the harness's pristine inputs for it were modified",
                ["reference_inputs_mutated"],
            )
        expected = _call(ref.model, ref_in)
        device.synchronize()
        inputs_check = compare(ref_in, cand_in, req.atol, req.rtol, path="inputs")
        if not inputs_check.ok:
            raise Verdict(
                "verify",
                f"trial {k + 1}: ModelNew modified its inputs in place ({inputs_check.message})",
                ["input_mutated"],
            )
        verdict = compare(expected, snapshot, req.atol, req.rtol)
        trials.append({"trial": k + 1, **verdict.as_dict()})
        if not verdict.ok:
            raise Verdict(
                "verify",
                f"trial {k + 1} of {len(ref.verify_sets)}: {verdict.message}",
                [f"output_mismatch:{verdict.kind}"],
            )
    if not ref.inputs_intact():
        raise Verdict(
            "verify",
            "the harness's pristine inputs were modified during verification",
            ["reference_inputs_mutated"],
        )
    return trials, all_ops


def _own_state(cand: torch.nn.Module, ref: Reference) -> list[tuple[int, ...]]:
    """Fingerprint of ModelNew's parameters and buffers, without the kinds of entry the
    reference's own forward updates (its BatchNorm's running statistics in training mode:
    a ModelNew that keeps an ``nn.BatchNorm`` updates them too, under any name)."""
    kinds = {key.rsplit(".", 1)[-1] for key in ref.own_updates}
    state = cand.state_dict()
    return fingerprint_nested([v for k, v in state.items() if k.rsplit(".", 1)[-1] not in kinds])


def _decoy_check(
    req: WorkerRequest,
    ref: Reference,
    cand: torch.nn.Module,
    device: Device,
    shim: BuildShim,
    state: GlobalState,
    identities: FunctionIdentities,
    threads_before: int,
    result: EvaluationRecord,
) -> None:
    """Triton kernels must do part of the output's work: one more call with every Triton
    launch skipped must not still give the right output. The inputs are a set the last
    verified call did not use (so a buffer the kernels filled then holds another answer)."""
    if len(ref.verify_sets) > 1:
        inputs = ref.verify_sets[0]
    elif req.settings.timing.enabled and ref.timing_inputs():
        inputs = ref.timing_inputs()[0]
    else:
        result.note(NOTE_DECOY_CHECK_SKIPPED, "one trial and no timing: no unused input set")
        return
    expected = _call(ref.model, clone_nested(inputs))
    device.synchronize()
    try:
        with shim.triton.skipping():
            out = _call(cand, clone_nested(inputs))
            device.synchronize()
    except Exception:
        return  # without its kernels the forward fails: they matter
    _integrity(ref, state, identities, threads_before, where="in the decoy check", tensors=False)
    if compare(expected, out, req.atol, req.rtol).ok:
        raise Verdict(
            "verify",
            "with every Triton launch skipped, ModelNew's output is still right: its Triton "
            "kernels do none of the output's work (a decoy launch beside other compute)",
            ["custom_kernel_unused"],
        )


def _raised(
    err: BaseException, shim: BuildShim, files: tuple[str, ...], stage: str, what: str
) -> Verdict:
    """The verdict for candidate code that raised: a build failure (caught or not) is stage
    ``build`` with the compiler's diagnostics; anything else is ``forward_raised``."""
    build = failed_build(shim, err, files)
    if build is not None:
        return Verdict("build", build)
    return Verdict(stage, f"{what} raised {describe_exception(err, files)}", ["forward_raised"])


def _policy(
    policy: str, recorder: OpRecorder, custom_calls: int, build_failure: str | None
) -> None:
    """Judge one forward by the policy's op rules and its custom-kernel requirement."""
    decided = rules(policy)
    bad = forbidden_ops(recorder.ops, policy) if decided.op_policy else []
    idle = decided.custom_kernel_required and custom_calls == 0
    op_flags = [f"forbidden_op:{op}" for op in bad]
    if idle and build_failure is not None:
        raise Verdict(
            "verify",
            f"policy {policy}: no custom kernel ran: ModelNew.forward called no function of a "
            "compiled extension; the solution caught the failure of its extension build and "
            f"fell back to PyTorch. The build error:\n{build_failure}",
            ["no_custom_kernel", *op_flags],
        )
    if bad:
        raise Verdict(
            "verify",
            f"policy {policy}: ModelNew.forward ran torch compute ops ({', '.join(bad)}); only "
            "tensor creation, views and vendor GEMM/convolution are allowed, the rest must be "
            "your own kernels",
            [*op_flags, *(["no_custom_kernel"] if idle else [])],
        )
    if idle:
        raise Verdict(
            "verify",
            f"policy {policy}: ModelNew.forward called no custom kernel (no function of a "
            "compiled extension ran)",
            ["no_custom_kernel"],
        )


def _weight_probe(
    req: WorkerRequest,
    ref: Reference,
    instance: Instance,
    device: Device,
    shim: BuildShim,
    state: GlobalState,
    identities: FunctionIdentities,
    threads_before: int,
    result: EvaluationRecord,
) -> None:
    """Give both models the same new parameter values; they must still agree (``weights.py``).

    The reference's weights, as given, are fingerprinted before the candidate's call and
    checked after it (a change then would be undone by the restore and go unseen). The
    reference's parameters are restored from its pristine copy afterwards, the candidate's from
    a copy made here; the reference's fingerprint must then hold again.
    """
    pairs, reason = probe_pairs(ref.model, instance.model, instance.transfer.transferred)
    result.weight_probe = {"ran": bool(pairs), "parameters": len(pairs), "skipped": reason}
    if not pairs:
        return
    generator = torch.Generator(device=device.torch_device)
    generator.manual_seed(derive_seed(req.seed, "weight_probe"))
    files = tuple(str(p) for p in Path(req.solution_root).rglob("*.py"))
    inputs = ref.timing_inputs()[0]
    with same_new_weights(pairs, generator, ref.state):
        given = fingerprint_nested(list(ref.model.state_dict().values()))
        try:
            out = clone_nested(_call(instance.model, clone_nested(inputs)))
            device.synchronize()
        except Exception as err:
            raise _raised(
                err, shim, files, "verify", "with new weights, ModelNew.forward"
            ) from None
        if fingerprint_nested(list(ref.model.state_dict().values())) != given:
            raise Verdict(
                "verify",
                "the reference model's weights were modified while both had new weights",
                ["reference_weights_mutated"],
            )
        _integrity(ref, state, identities, threads_before, where="with new weights", tensors=False)
        expected = _call(ref.model, clone_nested(inputs))
        device.synchronize()
    if not ref.weights_intact():
        raise Verdict(
            "verify", "the reference model's weights were modified", ["reference_weights_mutated"]
        )
    verdict = compare(expected, out, req.atol, req.rtol)
    if not verdict.ok:
        raise Verdict(
            "verify",
            "ModelNew matched Model at the initial weights, but not after both models received "
            f"the same new values for their {len(pairs)} learnable parameter(s) "
            f"({verdict.message}): its output does not follow its parameters (weights ignored, "
            "or copies of them made at construction or on the first call)",
            ["init_values_only"],
        )


def _weights_note(ref: Reference, instance: Instance, result: EvaluationRecord) -> None:
    if instance.transfer.transferred:
        return
    probe = result.weight_probe or {}
    text = not_transferred_text(instance.transfer, bool(probe.get("ran")), probe.get("skipped"))
    if instance.built_on_host != ref.built_on_host:
        text += "; note: ModelNew and Model were not built on the same device (see warnings)"
    result.note(NOTE_WEIGHTS_NOT_TRANSFERRED, text)


def _fallback_note(shim: BuildShim, result: EvaluationRecord) -> None:
    """A build failure the solution caught, under a policy that let it through (``off``)."""
    if shim.failure is None:
        return
    ran = "custom code from other extensions ran" if shim.usage.calls else "no custom code ran"
    result.note(
        NOTE_BUILD_FAILED_CAUGHT,
        f"an extension build failed and the solution caught the error ({ran}); the build "
        f"error:\n{shim.failure}",
    )


def _kernel_check(
    req: WorkerRequest,
    ref: Reference,
    cand: torch.nn.Module,
    shim: BuildShim,
    result: EvaluationRecord,
) -> None:
    """Record the GPU kernels of one candidate call; under `kernelbench`, own kernels must work.
    Own kernels: those of the candidate's modules (nm) and the Triton kernels it launched."""
    activities = profile_call(functools.partial(_call, cand, clone_nested(ref.verify_sets[0])))
    names = candidate_kernel_names(shim.module_paths, triton_launches.kernel_names(shim.triton))
    summary = summarise_kernels(activities, names)
    result.kernels = summary.as_dict()
    if names is None:
        result.warnings.append("nm not found: custom kernels cannot be told from torch's")
        return
    if req.settings.policy == "kernelbench" and summary.coverage < KERNELBENCH_MIN_COVERAGE:
        raise Verdict(
            "verify",
            f"policy kernelbench: your own kernels took {100 * summary.coverage:.2g}% of the "
            f"device time ({summary.custom_kernels} launches); they must do real work",
            ["custom_kernels_idle"],
        )


def _integrity(
    ref: Reference,
    state: GlobalState,
    identities: FunctionIdentities,
    threads_before: int,
    where: str,
    tensors: bool = True,
    inputs: bool = True,
) -> None:
    """Raise a verdict if the candidate changed anything of the harness's. ``tensors=False``
    skips the fingerprints of the pristine inputs and of the reference's weights (the checks
    whose cost grows with the problem's size); ``inputs=False`` skips only the former (each
    verification trial checks its own set, and all of them once after the last trial)."""
    changed = state.changed()
    if changed:
        state.restore()
        raise Verdict(
            "verify",
            f"global torch settings changed {where}: {', '.join(changed)}",
            [f"global_state_changed:{c}" for c in changed],
        )
    patched = identities.changed()
    if patched:
        raise Verdict(
            "verify",
            f"harness functions were replaced {where}: {', '.join(patched)}",
            [f"harness_patched:{p}" for p in patched],
        )
    if tensors and inputs and not ref.inputs_intact():
        raise Verdict(
            "verify",
            f"the harness's pristine inputs were modified {where}",
            ["reference_inputs_mutated"],
        )
    if tensors and not ref.weights_intact():
        raise Verdict(
            "verify",
            f"the reference model's weights were modified {where}",
            ["reference_weights_mutated"],
        )
    children = child_process_count()
    if children > 0:
        raise Verdict(
            "verify",
            f"{children} child process(es) were started {where} and are "
            "still running; do all work inside the call",
            ["processes_started"],
        )
    threads = settled_thread_count(threads_before)
    if threads_before > 0 and threads > threads_before:
        names = newest_thread_names(threads - threads_before)
        raise Verdict(
            "verify",
            f"{threads - threads_before} thread(s) were started {where} and "
            f"are still alive ({names or 'names unknown'}); do all work inside the call",
            ["threads_started"],
        )


def _check_canary(ref: Reference, canary: list[tuple[int, ...]], result: EvaluationRecord) -> None:
    again = fingerprint_nested(_call(ref.model, clone_nested(ref.verify_sets[0])))
    if again == canary:
        return
    third = fingerprint_nested(_call(ref.model, clone_nested(ref.verify_sets[0])))
    if third == again:
        raise Verdict(
            "verify",
            "the reference model now computes something else than before "
            "the candidate was imported",
            ["reference_changed"],
        )
    result.warnings.append("the reference is not bitwise deterministic on this device")


def _time(
    req: WorkerRequest,
    ref: Reference,
    cand: torch.nn.Module,
    device: Device,
    shim: BuildShim,
    state: GlobalState,
    identities: FunctionIdentities,
    threads_before: int,
    result: EvaluationRecord,
) -> None:
    skipped = 0

    files = tuple(str(p) for p in Path(req.solution_root).rglob("*.py"))

    def run_candidate(args: list[Any]) -> Any:
        nonlocal skipped
        before = shim.usage.calls
        try:
            out = _call(cand, args)
        except Exception as err:
            raise _raised(err, shim, files, "time", "a timed call of ModelNew.forward") from None
        if shim.usage.calls == before:
            skipped += 1
        return out

    def after_call(thorough: bool) -> list[str]:
        try:
            _integrity(
                ref, state, identities, threads_before, where="during timing", tensors=thorough
            )
        except Verdict as v:
            return v.flags
        return []

    outcome = time_interleaved(
        run_candidate,
        lambda args: _call(ref.model, args),
        ref.timing_inputs(),
        device,
        req.settings.timing,
        req.atol,
        req.rtol,
        random.Random(req.seed),
        after_call,
    )
    if outcome.failure:
        raise Verdict("time", outcome.failure, outcome.flags)
    assert outcome.candidate is not None and outcome.reference is not None
    required = rules(req.settings.policy).custom_kernel_required
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


def _stream_check(
    req: WorkerRequest,
    ref: Reference,
    cand: torch.nn.Module,
    device: Device,
    result: EvaluationRecord,
) -> None:
    """Device work of a call (all streams, CUPTI) must fit in the time CUDA events measured.

    The reference is profiled alongside (calls alternate) as a control: when the device runs
    slower now than while timing (clocks drop under a long compute-bound load), its profiled
    time exceeds its timed median by the same factor, and the candidate's allowance grows by
    that factor, up to ``MAX_CLOCK_DRIFT``.
    """
    busy: dict[str, list[float]] = {"cand": [], "ref": []}
    for j in range(3):
        for side, model in (("cand", cand), ("ref", ref.model)):
            args = clone_nested(ref.timing_inputs()[j % len(ref.timing_inputs())])
            device.flush_cache()
            busy[side].append(busy_us(profile_call(functools.partial(_call, model, args))))
    assert result.runtime_us is not None and result.eager_us is not None
    assert result.timing is not None  # the stream check follows the timing
    measured = result.runtime_us
    profiled = statistics.median(busy["cand"])
    control = statistics.median(busy["ref"])
    drift = min(MAX_CLOCK_DRIFT, max(1.0, control / result.eager_us))
    result.timing["profiler_busy_us"] = round(profiled, 3)
    result.timing["profiler_busy_reference_us"] = round(control, 3)
    if profiled > measured * drift * STREAM_SLACK + STREAM_SLACK_US:
        raise Verdict(
            "time",
            f"the GPU was busy {profiled:.1f} us per call (all streams) but the timed stream "
            f"only {measured:.1f} us: work escaped the timed stream; make the launch stream wait "
            "for every stream you use",
            ["work_outside_timed_stream"],
        )


def _profile(
    ref: Reference, cand: torch.nn.Module, shim: BuildShim, result: EvaluationRecord
) -> None:
    inputs = ref.timing_inputs()[0]
    activities = profile_call(functools.partial(_call, cand, clone_nested(inputs)))
    names = candidate_kernel_names(shim.module_paths, triton_launches.kernel_names(shim.triton))
    result.profile = {
        "candidate": summarise_kernels(activities, names).as_dict(),
        "eager": summarise_kernels(
            profile_call(functools.partial(_call, ref.model, clone_nested(inputs))), set()
        ).as_dict(),
    }


def _reference_call_s(ref: Reference, device: Device) -> float:
    """Seconds of one warm, synchronised reference call: the parent derives the candidate's
    device budget from it (``evaluator/device_budget.py``)."""
    args = clone_nested(ref.verify_sets[0])
    began = time.perf_counter()
    _call(ref.model, args)
    device.synchronize()
    return round(time.perf_counter() - began, 6)


def _call(model: torch.nn.Module, inputs: list[Any]) -> Any:
    return model(*inputs)
