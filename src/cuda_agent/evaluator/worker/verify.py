"""The ``evaluate`` mode's correctness stages: whether ModelNew computes what Model computes.

* ``verify_trials``: the verification trials (step 4 of ``modes/evaluate.py``'s order): on each
  input set the candidate runs first on its own clone, under the ATen-op recorder, then the
  reference on another clone; outputs compared; inputs, parameters and global state checked
  after each call; each forward judged by the policy's op rules and custom-kernel requirement;
  in the last trial the candidate's clone is guarded (``red_zones.py``: each input inside a
  buffer whose edges hold NaN);
* ``decoy_check``: Triton kernels must do part of the output's work (one call with every
  Triton launch skipped must not still be right);
* ``weight_probe``: both models get the same new parameter values and must still agree
  (``weights.py`` plans and applies them);
* ``weights_note``, ``fallback_note``: the notes a correct result may carry about them;
* ``check_canary``: the reference must still compute what it did before the candidate was
  imported (step 5);
* ``kernel_check``: on the GPU, the kernel record of one call, and the policy's minimum share
  of device time for the candidate's own kernels (step 6);
* ``integrity``: the harness checks that follow every call of candidate code (global state,
  harness functions, pristine inputs and weights, child processes, threads), also used by
  ``modes/evaluate.py`` after the import and by ``timed.py`` during timing.

What it does not do: decide the order of the stages (``modes/evaluate.py``), time anything
(``timed.py``), or decide what a policy requires (it reads ``session.rules``, ``policies.py``).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

from cuda_agent.evaluator.worker import triton_launches
from cuda_agent.evaluator.worker.candidate import failed_build, namespace_hint, problem_namespace
from cuda_agent.evaluator.worker.census import (
    child_process_count,
    newest_thread_names,
    settled_thread_count,
)
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device_memory import (
    CONTENTION_FLAG,
    contention_message,
    oom_census,
)
from cuda_agent.evaluator.worker.guards import OpRecorder, forbidden_ops
from cuda_agent.evaluator.worker.kernel_symbols import device_kernel_names
from cuda_agent.evaluator.worker.kernels import (
    candidate_kernel_names,
    profile_call,
    summarise_kernels,
)
from cuda_agent.evaluator.worker.memory_flags import FLAG_DEVICE_FAULT, is_device_fault
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.policies import (
    NOTE_BUILD_FAILED_CAUGHT,
    NOTE_DECOY_CHECK_SKIPPED,
    NOTE_WEIGHTS_NOT_TRANSFERRED,
)
from cuda_agent.evaluator.worker.red_zones import (
    FILL_BYTE,
    GuardedInput,
    check_guards,
    guard_inputs,
    read_outside,
)
from cuda_agent.evaluator.worker.reference import Reference
from cuda_agent.evaluator.worker.session import EvaluationSession, Verdict, call, solution_files
from cuda_agent.evaluator.worker.tensors import clone_nested, derive_seed, fingerprint_nested
from cuda_agent.evaluator.worker.uninitialised import uninitialised_memory_filled
from cuda_agent.evaluator.worker.weights import (
    not_transferred_text,
    probe_pairs,
    same_new_weights,
)


def verify_trials(
    s: EvaluationSession, cand_weights: list[tuple[int, ...]]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Run the verification trials; return each trial's comparison and the ATen ops counted.
    ``cand_weights``: ModelNew's ``own_state`` before its first call (it must not change)."""
    ref, cand, device, shim = s.ref, s.cand, s.device, s.shim
    trials = []
    all_ops: dict[str, int] = {}
    last = len(ref.verify_sets) - 1
    for k, inputs in enumerate(ref.verify_sets):
        guarded: list[GuardedInput] = []
        if k == last:  # the red zones: each input inside a NaN-edged buffer (red_zones.py)
            cand_in, guarded = guard_inputs(inputs)
        else:
            cand_in = clone_nested(inputs)
        calls_before = shim.usage.calls
        recorder = OpRecorder()
        try:
            with recorder:
                out = call(cand, cand_in)
            device.synchronize()
        except Exception as err:
            raise raised(s, err, s.files, "verify", f"trial {k + 1}: ModelNew.forward") from None
        snapshot = clone_nested(out)
        del out
        for op, n in recorder.ops.items():
            all_ops[op] = all_ops.get(op, 0) + n
        integrity(s, where=f"during trial {k + 1}", inputs=False)
        check_guards(guarded, k + 1)
        _judge_forward(s, recorder, shim.usage.calls - calls_before)
        if own_state(cand, ref) != cand_weights:
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
        expected = call(ref.model, ref_in)
        device.synchronize()
        inputs_check = compare(ref_in, cand_in, s.req.atol, s.req.rtol, path="inputs")
        if not inputs_check.ok:
            raise Verdict(
                "verify",
                f"trial {k + 1}: ModelNew modified its inputs in place ({inputs_check.message})",
                ["input_mutated"],
            )
        verdict = compare(expected, snapshot, s.req.atol, s.req.rtol)
        trials.append({"trial": k + 1, **verdict.as_dict()})
        if not verdict.ok:
            if _reads_outside(s, inputs, expected, guarded_trial=bool(guarded)):
                raise read_outside(k + 1, verdict.message)
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


def _reads_outside(
    s: EvaluationSession, inputs: list[Any], expected: Any, *, guarded_trial: bool
) -> bool:
    """A trial's output was wrong: is it a read past an input's edge? Yes where ModelNew's
    output on copies of ``inputs`` inside buffers whose edges hold NaN is wrong (the guarded
    trial was that call) and on copies whose edges hold zeros is right. A plain trial asks
    both: what lies past a plain copy is whatever the allocator left there, and when that is
    NaN the read fails the plain trial before the guarded one (cpu, CI 2026-12-06); the
    verdict must not depend on it (``red_zones.py``)."""
    if not guarded_trial and _right_on_edged_copies(s, inputs, expected, FILL_BYTE):
        return False
    return _right_on_edged_copies(s, inputs, expected, 0)


def _right_on_edged_copies(
    s: EvaluationSession, inputs: list[Any], expected: Any, fill: int
) -> bool:
    """ModelNew called once more on copies of ``inputs`` inside buffers whose edge bytes are
    ``fill``: is its output right? (Only the guarded trial checks its edges for writes.)"""
    copies, _ = guard_inputs(inputs, fill=fill)
    try:
        # "right on zero edges" must not come from garbage the candidate never wrote (a scratch
        # from recycled blocks): its uninitialised allocations hold NaN in this call
        with uninitialised_memory_filled() if fill == 0 else contextlib.nullcontext():
            out = call(s.cand, copies)
            s.device.synchronize()
    except Exception:
        return False
    integrity(s, where=f"in the call on copies edged with {fill:#04x} bytes", inputs=False)
    return compare(expected, out, s.req.atol, s.req.rtol).ok


def own_state(cand: torch.nn.Module, ref: Reference) -> list[tuple[int, ...]]:
    """Fingerprint of ModelNew's parameters and buffers, without the kinds of entry the
    reference's own forward updates (its BatchNorm's running statistics in training mode:
    a ModelNew that keeps an ``nn.BatchNorm`` updates them too, under any name)."""
    kinds = {key.rsplit(".", 1)[-1] for key in ref.own_updates}
    state = cand.state_dict()
    return fingerprint_nested([v for k, v in state.items() if k.rsplit(".", 1)[-1] not in kinds])


def _judge_forward(s: EvaluationSession, recorder: OpRecorder, custom_calls: int) -> None:
    """Judge one forward by the policy's op rules and its custom-kernel requirement."""
    policy, decided, build_failure = s.req.settings.policy, s.rules, s.shim.failure
    bad = forbidden_ops(recorder.ops) if decided.op_policy else []
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


def raised(
    s: EvaluationSession, err: BaseException, files: tuple[str, ...], stage: str, what: str
) -> Verdict:
    """The verdict for candidate code that raised: a build failure (caught or not) is stage
    ``build`` with the compiler's diagnostics; anything else is ``forward_raised``, with
    ``device_fault`` where the GPU stopped a kernel on a bad address. ``files``: the
    solution's files whose frames the message shows."""
    build = failed_build(s.shim, err, files)
    if build is not None:
        return Verdict("build", build)
    count = oom_census(err)
    if count is not None and count.contended:  # the device's neighbours, not the candidate
        return Verdict("internal", contention_message(count, what), [CONTENTION_FLAG])
    described = describe_exception(err, files)
    described += namespace_hint(err, problem_namespace(s.req, s.ref, s.rules))
    if count is not None:
        described += f" ({count.text()})"
    flags = ["forward_raised"]
    if is_device_fault(str(err)):  # a kernel's bad address: the memory check names it
        flags.append(FLAG_DEVICE_FAULT)
    return Verdict(stage, f"{what} raised {described}", flags)


def decoy_check(s: EvaluationSession) -> None:
    """Triton kernels must do part of the output's work: one more call with every Triton
    launch skipped must not still give the right output. The inputs are a set the last
    verified call did not use (so a buffer the kernels filled then holds another answer)."""
    ref = s.ref
    if len(ref.verify_sets) > 1:
        inputs = ref.verify_sets[0]
    elif s.req.settings.timing.enabled and ref.timing_inputs():
        inputs = ref.timing_inputs()[0]
    else:
        s.result.note(NOTE_DECOY_CHECK_SKIPPED, "one trial and no timing: no unused input set")
        return
    expected = call(ref.model, clone_nested(inputs))
    s.device.synchronize()
    try:
        with s.shim.triton.skipping():
            out = call(s.cand, clone_nested(inputs))
            s.device.synchronize()
    except Exception:
        return  # without its kernels the forward fails: they matter
    integrity(s, where="in the decoy check", tensors=False)
    if compare(expected, out, s.req.atol, s.req.rtol).ok:
        raise Verdict(
            "verify",
            "with every Triton launch skipped, ModelNew's output is still right: its Triton "
            "kernels do none of the output's work (a decoy launch beside other compute)",
            ["custom_kernel_unused"],
        )


def weight_probe(s: EvaluationSession) -> None:
    """Give both models the same new parameter values; they must still agree (``weights.py``).

    The reference's weights, as given, are fingerprinted before the candidate's call and
    checked after it (a change then would be undone by the restore and go unseen). The
    reference's parameters are restored from its pristine copy afterwards, the candidate's from
    a copy made here; the reference's fingerprint must then hold again.
    """
    ref, instance, device = s.ref, s.instance, s.device
    assert instance is not None  # the probe follows verification
    pairs, reason = probe_pairs(ref.model, instance.model, instance.transfer.transferred)
    s.result.weight_probe = {"ran": bool(pairs), "parameters": len(pairs), "skipped": reason}
    if not pairs:
        return
    generator = torch.Generator(device=device.torch_device)
    generator.manual_seed(derive_seed(s.req.seed, "weight_probe"))
    files = solution_files(s.req)
    inputs = ref.timing_inputs()[0]
    with same_new_weights(pairs, generator, ref.state):
        given = fingerprint_nested(list(ref.model.state_dict().values()))
        try:
            out = clone_nested(call(instance.model, clone_nested(inputs)))
            device.synchronize()
        except Exception as err:
            raise raised(s, err, files, "verify", "with new weights, ModelNew.forward") from None
        if fingerprint_nested(list(ref.model.state_dict().values())) != given:
            raise Verdict(
                "verify",
                "the reference model's weights were modified while both had new weights",
                ["reference_weights_mutated"],
            )
        integrity(s, where="with new weights", tensors=False)
        expected = call(ref.model, clone_nested(inputs))
        device.synchronize()
    if not ref.weights_intact():
        raise Verdict(
            "verify", "the reference model's weights were modified", ["reference_weights_mutated"]
        )
    verdict = compare(expected, out, s.req.atol, s.req.rtol)
    if not verdict.ok:
        raise Verdict(
            "verify",
            "ModelNew matched Model at the initial weights, but not after both models received "
            f"the same new values for their {len(pairs)} learnable parameter(s) "
            f"({verdict.message}): its output does not follow its parameters (weights ignored, "
            "or copies of them made at construction or on the first call)",
            ["init_values_only"],
        )


def weights_note(s: EvaluationSession) -> None:
    """The note for weights that were not transferred (after the probe, which it names)."""
    instance, result = s.instance, s.result
    assert instance is not None
    if instance.transfer.transferred:
        return
    probe = result.weight_probe or {}
    text = not_transferred_text(instance.transfer, bool(probe.get("ran")), probe.get("skipped"))
    if instance.built_on_host != s.ref.built_on_host:
        text += "; note: ModelNew and Model were not built on the same device (see warnings)"
    result.note(NOTE_WEIGHTS_NOT_TRANSFERRED, text)


def fallback_note(s: EvaluationSession) -> None:
    """A build failure the solution caught, under a policy that let it through (``off``)."""
    shim = s.shim
    if shim.failure is None:
        return
    ran = "custom code from other extensions ran" if shim.usage.calls else "no custom code ran"
    s.result.note(
        NOTE_BUILD_FAILED_CAUGHT,
        f"an extension build failed and the solution caught the error ({ran}); the build "
        f"error:\n{shim.failure}",
    )


def check_canary(s: EvaluationSession) -> None:
    """The reference, re-run on trial 0, must still give the output it gave before the
    candidate was imported (a third run tells a changed model from a nondeterministic one)."""
    ref = s.ref
    again = fingerprint_nested(call(ref.model, clone_nested(ref.verify_sets[0])))
    if again == s.canary:
        return
    third = fingerprint_nested(call(ref.model, clone_nested(ref.verify_sets[0])))
    if third == again:
        raise Verdict(
            "verify",
            "the reference model now computes something else than before "
            "the candidate was imported",
            ["reference_changed"],
        )
    s.result.warnings.append("the reference is not bitwise deterministic on this device")


def kernel_check(s: EvaluationSession) -> None:
    """Record the GPU kernels of one candidate call; own kernels must take at least the
    policy's ``min_custom_kernel_coverage`` of the device time. Own kernels: those of the
    candidate's modules (nm) and the Triton kernels it launched. Their device names are kept
    for the memory check (``result.kernel_symbols``)."""
    ref, shim, result = s.ref, s.shim, s.result
    activities = profile_call(functools.partial(call, s.cand, clone_nested(ref.verify_sets[0])))
    launched = triton_launches.kernel_names(shim.triton)
    symbols = device_kernel_names(shim.module_paths)
    result.kernel_symbols = None if symbols is None else sorted(set(symbols) | launched)
    names = candidate_kernel_names(shim.module_paths, launched)
    summary = summarise_kernels(activities, names)
    result.kernels = summary.as_dict()
    if names is None:
        result.warnings.append("nm not found: custom kernels cannot be told from torch's")
        return
    if summary.coverage < s.rules.min_custom_kernel_coverage:
        raise Verdict(
            "verify",
            f"policy {s.req.settings.policy}: your own kernels took "
            f"{100 * summary.coverage:.2g}% of the device time ({summary.custom_kernels} "
            "launches); they must do real work",
            ["custom_kernels_idle"],
        )


def integrity(s: EvaluationSession, where: str, tensors: bool = True, inputs: bool = True) -> None:
    """Raise a verdict if the candidate changed anything of the harness's. ``tensors=False``
    skips the fingerprints of the pristine inputs and of the reference's weights (the checks
    whose cost grows with the problem's size); ``inputs=False`` skips only the former (each
    verification trial checks its own set, and all of them once after the last trial)."""
    ref, state, identities, threads_before = s.ref, s.state, s.identities, s.threads_before
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
