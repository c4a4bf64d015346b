"""The calls KernelBench's own scripts make, shared by the modes and benchmarks/compat.

``RUN_AND_CHECK`` (the defaults of ``scripts/run_and_check.py``), ``set_arch`` as that script
calls it, KernelBench's static checker, and its result object as a plain dict. It does not
import KernelBench (``kb_import`` does; these take its modules) nor run an evaluation.
"""

from __future__ import annotations

from typing import Any

from benchmarks.kb_peer.report import error_string, jsonable

# scripts/run_and_check.py and scripts/eval_from_generations.py defaults
RUN_AND_CHECK = {
    "num_correct_trials": 5,
    "num_perf_trials": 100,
    "timing_method": "cuda_event",
    "precision": "fp32",
    "backend": "cuda",
}


def exec_result(result: Any) -> dict[str, Any]:
    """KernelExecResult (pydantic) -> plain dict; KB returns None on a build lock error."""
    if result is None:
        return {"kb_returned_none": True}
    if hasattr(result, "model_dump"):
        return jsonable(result.model_dump())
    return jsonable(dict(vars(result)))


def static_check(mods: dict[str, Any], src: str) -> dict[str, Any]:
    """KB's regex static checker, as run_and_check.py runs it (informational here)."""
    try:
        valid, errors, warnings = mods["static"].validate_kernel_static(
            src, backend=RUN_AND_CHECK["backend"], precision=RUN_AND_CHECK["precision"]
        )
        return {"valid": valid, "errors": errors, "warnings": warnings}
    except Exception as exc:
        return {"error": error_string(exc)}


def set_arch(mods: dict[str, Any], arch: str) -> None:
    """run_and_check.py (local) calls set_gpu_arch(gpu_arch) before evaluating."""
    if arch and arch.lower() != "none":
        mods["utils"].set_gpu_arch([a.strip() for a in arch.split(",")])
