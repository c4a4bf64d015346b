"""The ``problem_check`` mode: run a problem, describe it, and lint it for degeneracy.

Broken problems (the module does not import, ``get_inputs`` returns no tensors, the forward
raises or returns NaN/Inf) are errors. A working problem is also linted, so that a trivial
candidate cannot pass it (exploit family A2):

* ``zeros_pass``: an all-zeros output would pass the tolerance on every input tried;
* ``constant_pass``: the output's own mean, broadcast, would pass;
* ``independent_of_inputs``: three different input draws give the same output;
* ``independent_of_weights``: two different weight initialisations give the same output;
* ``nondeterministic``: the same inputs twice give outputs that differ beyond the tolerance
  (a bitwise difference alone is a warning: the evaluator tolerates it).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

from cuda_agent.core.records import ProblemCheckRecord
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import (
    PROBLEM_FILE,
    ProblemFailure,
    Reference,
    build_reference,
)
from cuda_agent.evaluator.worker.tensors import (
    clone_nested,
    derive_seed,
    describe_shapes,
    fingerprint_nested,
    iter_tensors,
    map_tensors,
)

INPUT_DRAWS = 3


def run(req: WorkerRequest, channel: ResultChannel) -> ProblemCheckRecord:
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    try:
        with torch.no_grad():  # scoped: tests call this in their own process
            report, _ = check_reference(req.problem_source, req.seed, req.atol, req.rtol, device)
        return report
    except ProblemFailure as err:
        failed = ProblemCheckRecord()
        failed.fail("problem", str(err))
        return failed


def check_reference(
    source: str, seed: int, atol: float, rtol: float, device: Device
) -> tuple[ProblemCheckRecord, Reference]:
    """Run and lint the problem ``source``; the report, and the reference it built."""
    ref = build_reference(source, seed, device, verify_trials=INPUT_DRAWS, timing_sets=0)
    times: list[float] = []
    outputs = [run_forward(ref.model, inputs, device, times) for inputs in ref.verify_sets]
    tensors = list(iter_tensors(outputs[0]))
    if not tensors:
        raise ProblemFailure("Model.forward returned no tensor")
    for out in outputs:
        if not all(
            bool(torch.isfinite(t).all()) for t in iter_tensors(out) if t.is_floating_point()
        ):
            raise ProblemFailure("Model.forward returned NaN or infinite values")
    lint, warnings = lint_outputs(ref, outputs, seed, atol, rtol, device, times)
    report = ProblemCheckRecord(
        ok=True,
        inputs=describe_shapes(ref.verify_sets[0]),
        outputs=describe_shapes(outputs[0]),
        parameters=sum(p.numel() for p in ref.model.parameters()),
        forward_ms=round(statistics.median(times), 3),
        lint=lint,
        warnings=warnings,
        device=device.info(),
    )
    return report, ref


def lint_outputs(
    ref: Reference,
    outputs: list[Any],
    seed: int,
    atol: float,
    rtol: float,
    device: Device,
    times: list[float],
) -> tuple[list[str], list[str]]:
    """The lint findings and warnings of a built reference, given its outputs on the first
    ``len(outputs)`` verification sets (the flags of the module docstring; with a single set,
    ``independent_of_inputs`` cannot be judged and is not reported)."""
    again = run_forward(ref.model, ref.verify_sets[0], device, times)
    lint: list[str] = []
    warnings: list[str] = []
    if not compare(outputs[0], again, atol, rtol).ok:
        lint.append("nondeterministic")
    elif fingerprint_nested(outputs[0]) != fingerprint_nested(again):
        warnings.append("not bitwise deterministic (within tolerance)")
    if len(outputs) > 1 and all(compare(outputs[0], o, atol, rtol).ok for o in outputs[1:]):
        lint.append("independent_of_inputs")
    if sum(p.numel() for p in ref.model.parameters()):
        other = _other_init(ref, derive_seed(seed, "other-init"), device)
        out_w = run_forward(other, ref.verify_sets[0], device, times)
        del other
        if compare(outputs[0], out_w, atol, rtol).ok:
            lint.append("independent_of_weights")
    if all(compare(out, map_tensors(out, torch.zeros_like), atol, rtol).ok for out in outputs):
        lint.append("zeros_pass")
    if all(compare(out, map_tensors(out, _own_mean), atol, rtol).ok for out in outputs):
        lint.append("constant_pass")
    return lint, warnings


def _other_init(ref: Reference, seed: int, device: Device) -> torch.nn.Module:
    """The reference's ``Model`` built again from another seed (other initial weights)."""
    try:
        model, _ = build_on_device(ref.module.Model, ref.init_args, seed, device)
    except Exception as err:
        raise ProblemFailure(
            f"Model(*get_init_inputs()) failed: {describe_exception(err, (PROBLEM_FILE,))}"
        ) from None
    if not isinstance(model, torch.nn.Module):
        raise ProblemFailure(f"Model(*get_init_inputs()) returned {type(model).__name__}")
    return model


def run_forward(
    model: torch.nn.Module, inputs: list[Any], device: Device, times: list[float]
) -> Any:
    start = time.perf_counter()
    try:
        out = model(*clone_nested(inputs))
        device.synchronize()
    except Exception as err:
        raise ProblemFailure(
            f"Model.forward failed: {describe_exception(err, (PROBLEM_FILE,))}"
        ) from None
    times.append((time.perf_counter() - start) * 1000.0)
    return out


def _own_mean(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point() and t.numel():
        return torch.full_like(t, float(t.double().mean()))
    return t.clone()
