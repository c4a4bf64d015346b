"""The ``check_problem`` mode: run a problem once and describe it (or say why it is broken).

Checks that the module imports, ``get_init_inputs``/``get_inputs`` return lists (inputs hold
tensors), ``Model`` builds and its forward runs and returns finite tensors, the same seed gives
the same output (determinism) and two seeds give different outputs (the output depends on the
inputs). Deeper degeneracy checks (constant or near-zero outputs across seeds) belong to the
task lint.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from cuda_agent.evaluator.worker.device import make_device
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.evaluator.worker.reference import PROBLEM_FILE, ProblemFailure, build_reference
from cuda_agent.evaluator.worker.tensors import (
    clone_nested,
    describe_shapes,
    fingerprint_nested,
    iter_tensors,
)


def run_check_problem(req: WorkerRequest) -> dict[str, Any]:
    torch.set_grad_enabled(False)
    device = make_device(req.backend, req.cpu_threads)
    try:
        ref = build_reference(req.problem_source, req.seed, device, verify_trials=2, timing_sets=0)
        outputs = []
        start = time.perf_counter()
        for inputs in (ref.verify_sets[0], ref.verify_sets[0], ref.verify_sets[1]):
            try:
                out = ref.model(*clone_nested(inputs))
            except Exception as err:
                raise ProblemFailure(
                    f"Model.forward failed: {describe_exception(err, (PROBLEM_FILE,))}"
                ) from None
            device.synchronize()
            outputs.append(out)
        forward_ms = (time.perf_counter() - start) * 1000.0 / 3
        tensors = list(iter_tensors(outputs[0]))
        if not tensors:
            raise ProblemFailure("Model.forward returned no tensor")
        if not all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point()):
            raise ProblemFailure("Model.forward returned NaN or infinite values")
        warnings = []
        if fingerprint_nested(outputs[0]) != fingerprint_nested(outputs[1]):
            warnings.append("not bitwise deterministic: the same inputs gave different outputs")
        if fingerprint_nested(outputs[0]) == fingerprint_nested(outputs[2]):
            warnings.append("the output did not change when the inputs changed")
        params = sum(p.numel() for p in ref.model.parameters())
        return {
            "ok": True,
            "inputs": describe_shapes(ref.verify_sets[0]),
            "outputs": describe_shapes(outputs[0]),
            "parameters": params,
            "forward_ms": round(forward_ms, 3),
            "warnings": warnings,
            "device": device.info(),
        }
    except ProblemFailure as err:
        return {"ok": False, "error": str(err)}
