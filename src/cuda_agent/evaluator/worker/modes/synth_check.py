"""The ``synth_check`` mode: the execution filters of the dataset synthesiser, for a batch.

For each candidate problem of ``req.batch`` (``{"id", "source"}``), in order, and stopping at
the first filter that rejects it:

1. ``runs_eager``: the problem imports, builds and runs, and returns finite tensors;
2. ``deterministic``: the same inputs twice give the same output (the task lint);
3. ``depends_on_inputs`` / ``depends_on_weights``: different inputs (weights) give different
   outputs (two seeds, different outputs);
4. ``non_degenerate``: neither zeros nor the output's own mean would pass the tolerance;
5. ``runtime_window``: the eager forward's median time lies inside ``req.window_ms``;
6. ``runs_compile``: ``torch.compile(Model)`` runs and matches eager within the tolerance.

Each verdict is sent as an event (so that a worker that dies mid-batch loses only the
candidate it was on) and the final record lists them all. Everything that touches the device
for a measurement runs under the device's timing lock (``req.lock_path``), so several workers
may share a GPU: they overlap their compilation, never their timing.

Not here: duplicates and decontamination (static, in the parent: ``synth/filters.py``).
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from cuda_agent.core.locks import device_lock
from cuda_agent.core.records import SynthCheckRecord
from cuda_agent.evaluator.worker.compare import compare
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.modes.problem_check import check_reference
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import ProblemFailure
from cuda_agent.evaluator.worker.tensors import clone_nested

LINT_FILTERS = {
    "nondeterministic": "deterministic",
    "independent_of_inputs": "depends_on_inputs",
    "independent_of_weights": "depends_on_weights",
    "zeros_pass": "non_degenerate",
    "constant_pass": "non_degenerate",
}
TIMED_CALLS = 7
TIME_CAP_S = 2.0


def run(req: WorkerRequest, channel: ResultChannel) -> SynthCheckRecord:
    with torch.no_grad():  # scoped, so that calling it in-process leaves autograd alone
        return _run_batch(req, channel)


def _run_batch(req: WorkerRequest, channel: ResultChannel) -> SynthCheckRecord:
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    lo, hi = (req.window_ms[0], req.window_ms[1]) if req.window_ms else (0.0, float("inf"))
    verdicts = []
    for item in req.batch:
        start = time.perf_counter()
        verdict = check_candidate(str(item["source"]), req, device, lo, hi)
        verdict["id"] = item["id"]
        verdict["check_seconds"] = round(time.perf_counter() - start, 3)
        channel.send("verdict", **verdict)
        verdicts.append(verdict)
        _release(device)
    return SynthCheckRecord(ok=True, verdicts=verdicts, device=device.info())


def check_candidate(
    source: str, req: WorkerRequest, device: Device, lo: float, hi: float
) -> dict[str, Any]:
    """One candidate's verdict: ``{"accepted": bool, "filter": ..., "reason": ..., ...}``."""
    lock = Path(req.lock_path) if req.lock_path else None
    with device_lock(lock):
        try:
            report, ref = check_reference(source, req.seed, req.atol, req.rtol, device)
        except ProblemFailure as err:
            return _reject("runs_eager", str(err))
        except Exception as err:  # a failure of the problem outside its own code paths
            return _reject("runs_eager", describe_exception(err))
        facts: dict[str, Any] = {
            "inputs": report.inputs,
            "outputs": report.outputs,
            "parameters": report.parameters,
        }
        for lint in report.lint:
            return _reject(LINT_FILTERS.get(lint, lint), f"task lint: {lint}", facts)
        inputs = ref.verify_sets[0]
        eager_ms = _median_ms(lambda: ref.model(*clone_nested(inputs)), device)
    facts["eager_ms"] = round(eager_ms, 4)
    if not lo <= eager_ms <= hi:
        return _reject(
            "runtime_window", f"eager forward {eager_ms:.3f} ms outside [{lo:g}, {hi:g}] ms", facts
        )
    try:
        start = time.perf_counter()
        compiled = torch.compile(ref.model)
        with device_lock(lock):
            first = compiled(*clone_nested(inputs))
            device.synchronize()
        facts["compile_seconds"] = round(time.perf_counter() - start, 3)
    except Exception as err:
        return _reject("runs_compile", f"torch.compile failed: {describe_exception(err)}", facts)
    with device_lock(lock):
        expected = ref.model(*clone_nested(inputs))
        check = compare(expected, first, req.atol, req.rtol)
        if not check.ok:
            return _reject(
                "runs_compile", f"torch.compile output differs from eager: {check.message}", facts
            )
        compile_ms = _median_ms(lambda: compiled(*clone_nested(inputs)), device)
    facts["compile_ms"] = round(compile_ms, 4)
    return {"accepted": True, "filter": "", "reason": "", **facts}


def _median_ms(call: Any, device: Device) -> float:
    """Median of a few L2-flushed calls after one warm-up (enough to place it in a window)."""
    call()
    device.synchronize()
    samples: list[float] = []
    deadline = time.perf_counter() + TIME_CAP_S
    while len(samples) < TIMED_CALLS and (len(samples) < 2 or time.perf_counter() < deadline):
        device.flush_cache()
        micros, _ = device.time_call(call)
        samples.append(micros / 1000.0)
    return statistics.median(samples)


def _reject(name: str, reason: str, facts: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"accepted": False, "filter": name, "reason": reason[:500], **(facts or {})}


def _release(device: Device) -> None:
    torch._dynamo.reset()
    gc.collect()
    if device.name == "cuda":
        torch.cuda.empty_cache()
