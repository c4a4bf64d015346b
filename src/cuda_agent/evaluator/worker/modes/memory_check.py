"""The ``memory_check`` mode: one forward of the candidate under a memory checker.

Started by the parent (``evaluator/checks/memory_safety.py``) as its own process under the checker:
compute-sanitizer's memcheck on the cuda backend (with torch's caching allocator off, so every
tensor is an allocation of its own and a read a few bytes past its end is outside any
allocation), AddressSanitizer on the cpu backend (the candidate's extensions built with
``-fsanitize=address``, the runtime preloaded). The checker writes its report to a file the
parent reads; this process only runs the call.

It also fills memory that a kernel is given uninitialised (``uninitialised.py``): from before the
candidate is imported to the end of the check, torch's deterministic mode with
``fill_uninitialized_memory`` is turned on, so every ``empty``-family allocation
(``torch::empty_like`` in an extension too) is filled with NaN (or the integer maximum). A kernel
that reads its output buffer before writing it (accumulating into ``empty``) then gives a wrong
output here, whatever a fresh ``cudaMalloc`` happened to hold in the verified run; the output is
compared with the reference's on the same inputs. The check draws its own seed (weights and inputs
verification never saw). When the output is wrong there, the candidate runs once more, the fill
still on, on the inputs and weights that verification used (the evaluation's seed): right there
says its kernel is wrong for the check's weights or inputs (``verified_inputs_ok``), not that it
reads memory it never wrote.

No timing and no integrity checks happen here: the verdict's other parts come from the
``evaluate`` process, which ran first. The process starts (imports, the CUDA context) before it
takes the device's shared turn, and holds that turn from the reference's build to the end;
``phases_s`` gives the seconds of each part, the wait for the turn included.
"""

from __future__ import annotations

from typing import Any

import torch

from cuda_agent.core.records import MemoryCheckRecord
from cuda_agent.evaluator.worker import device_turn
from cuda_agent.evaluator.worker.candidate import (
    CandidateFailure,
    imported_candidate,
    instance_for,
    request_shim,
)
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.policies import PolicyRules, rules
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure, Reference, build_reference
from cuda_agent.evaluator.worker.session import Phases
from cuda_agent.evaluator.worker.shim import BuildShim
from cuda_agent.evaluator.worker.tensors import clone_nested, derive_seed
from cuda_agent.evaluator.worker.uninitialised import uninitialised_memory_filled


def run(req: WorkerRequest, channel: ResultChannel) -> MemoryCheckRecord:
    record = MemoryCheckRecord()
    phases = Phases()
    try:
        with device_turn.holding(req.lock_path) as turn:  # shared: it measures no time
            if turn.held:
                phases.mark("wait_shared")
            _check(req, channel, record, phases)
    except (ProblemFailure, CandidateFailure) as err:
        record.fail(getattr(err, "stage", "problem"), str(err))
    record.phases_s = phases.seconds
    return record


def _check(
    req: WorkerRequest, channel: ResultChannel, record: MemoryCheckRecord, phases: Phases
) -> None:
    torch.set_grad_enabled(False)
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    channel.send("stage", stage="load")
    seed = derive_seed(req.seed, "memory_check")
    ref = build_reference(req.problem_source, seed, device, 1, 0)
    phases.mark("reference_and_inputs")
    if device_turn.current().alone_if_large(device.synchronize):
        phases.mark("wait_exclusive")
    shim = request_shim(req)
    shim.install()
    with uninitialised_memory_filled():
        _import_and_check(req, channel, record, phases, ref, device, shim)


def _import_and_check(
    req: WorkerRequest,
    channel: ResultChannel,
    record: MemoryCheckRecord,
    phases: Phases,
    ref: Reference,
    device: Device,
    shim: BuildShim,
) -> None:
    """Import the candidate and run its checked forward (again on verification's inputs when
    its output is wrong); the caller keeps uninitialised memory filled throughout."""
    decided = rules(req.settings.policy)
    model_new, files = imported_candidate(req, ref, shim, decided)
    phases.mark("import_candidate")
    channel.send("stage", stage="memory")
    try:
        ok, message = _checked_forward(model_new, ref, device, shim, decided, req, files)
    except CandidateFailure:
        raise  # ModelNew could not be built: the run's stage says so
    except Exception as err:
        record.fail("memory", f"ModelNew.forward raised {describe_exception(err, files)}")
        return
    phases.mark("checked_forward")
    record.ok, record.output_ok, record.output_message = True, ok, message
    if ok:
        return
    verified = build_reference(req.problem_source, req.seed, device, 1, 0)
    try:
        record.verified_inputs_ok, _ = _checked_forward(
            model_new, verified, device, shim, decided, req, files
        )
    except Exception:
        record.verified_inputs_ok = False
    phases.mark("verified_inputs_forward")


def _checked_forward(
    model_new: Any,
    ref: Reference,
    device: Device,
    shim: BuildShim,
    decided: PolicyRules,
    req: WorkerRequest,
    files: tuple[str, ...],
) -> tuple[bool, str]:
    """A ``ModelNew`` built as ``evaluate`` builds it for ``ref``, called on ``ref``'s first
    input set: (whether its output matches the reference's, the comparison's message)."""
    cand = instance_for(model_new, ref, device, files, shim, decided)
    inputs = ref.verify_sets[0]
    out = clone_nested(cand(*clone_nested(inputs)))
    device.synchronize()
    expected = ref.model(*clone_nested(inputs))
    device.synchronize()
    verdict = compare(expected, out, req.atol, req.rtol)
    return verdict.ok, verdict.message
