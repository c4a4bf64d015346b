"""The task lint of the problem, inside an evaluation worker, from the reference it built.

``modes/evaluate.py`` calls ``lint_reference`` right after the pristine reference and its inputs are
made and before any candidate code is imported, only when the parent asked for it (it has no
cached lint for this problem: ``evaluator/checks/task_lint.py``). It reuses
``problem_check.lint_outputs`` on the first verification sets, so the extra cost is the
reference's forwards on them, one repeat, and one more ``Model`` built with other weights (no
extra process, no extra input draws). A lint that cannot run (the reference raises in one of
these calls) is reported as an error entry; it never changes the evaluation's verdict. With a
single verification set (``--trials 1``) the entry is ``partial`` and the parent does not cache
it.
"""

from __future__ import annotations

import time
from typing import Any

from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.modes.problem_check import INPUT_DRAWS, lint_outputs, run_forward
from cuda_agent.evaluator.worker.reference import ProblemFailure, Reference
from cuda_agent.evaluator.worker.tensors import derive_seed


def lint_reference(
    ref: Reference, seed: int, atol: float, rtol: float, device: Device
) -> dict[str, Any]:
    """``{"lint": [...], "warnings": [...], "seconds": s}``, or ``{"lint": None, "error": ...}``."""
    started = time.perf_counter()
    times: list[float] = []
    try:
        outputs = [run_forward(ref.model, s, device, times) for s in ref.verify_sets[:INPUT_DRAWS]]
        lint, warnings = lint_outputs(
            ref, outputs, derive_seed(seed, "lint"), atol, rtol, device, times
        )
    except ProblemFailure as err:
        return {"lint": None, "error": str(err), "seconds": _since(started)}
    device.synchronize()
    entry: dict[str, Any] = {"lint": lint, "warnings": warnings, "seconds": _since(started)}
    if len(outputs) < 2:  # one input set: independence of the inputs was not judged
        entry["partial"] = True
    return entry


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 4)
