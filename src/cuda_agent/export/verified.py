"""``VERIFIED``: what an exported kernel was verified on, from the evaluation that allowed it.

The record travels inside the package (``NAME.VERIFIED``): the problem's and the solution's
hashes, the backend and device (GPU name, compute capability), the policy, precision and
tolerance, the sizes verified with their verdicts (``--shapes``), the speed-ups, the build's
GPU architecture flags, and the date. The runtime reads ``shapes`` (what a call is checked
against), ``generalizes`` (the default for other sizes) and ``device`` (compute capability).
"""

from __future__ import annotations

import datetime
from typing import Any

from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.core.version import __version__
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.export.sources import ExportError

FORMAT = 1
OUTPUT_KINDS = ("tensor", "tuple", "list")
RESULT_FIGURES = (
    "runtime_us",
    "eager_us",
    "compile_us",
    "speedup_eager",
    "speedup_compile",
    "reward",
)


def verified_record(
    problem: Problem,
    solution: Solution,
    result: EvalResult,
    opts: EvalOptions,
    *,
    module: str,
    op: str,
    arch_flags: list[str],
) -> dict[str, Any]:
    """The ``VERIFIED`` dict of one exported problem, from its evaluation with shapes."""
    shapes = result.details.shapes or []
    base = shapes[0] if shapes else {}
    if "inputs" not in base or "output" not in base:
        raise ExportError(
            f"{problem.id}: the problem's inputs and output could not be described at its "
            f"size ({'; '.join(result.warnings) or 'no shape plan'})"
        )
    kind = base["output"]["kind"]
    if kind not in OUTPUT_KINDS:
        raise ExportError(
            f"{problem.id}: Model.forward returns {base['output'].get('type', kind)}; export "
            "supports a tensor or a tuple or list of tensors"
        )
    generalizes = result.generalizes
    return {
        "format": FORMAT,
        "module": module,
        "op": op,
        "problem": {
            "id": problem.id,
            "hash": problem.content_hash,
            "size": problem.size,
            "level": problem.level,
            "set": problem.set_name,
            "description": problem.description,
        },
        "solution": {
            "hash": solution.content_hash,
            "kind": solution.kind.value,
            "name": solution.path.name,
        },
        "backend": result.backend,
        "language": result.language,
        "device": (result.record.device if result.record is not None else None) or {},
        "policy": str(opts.policy),  # plain data: this record is written as Python source
        "precision": opts.precision,
        "tolerance": {
            "atol": opts.atol if opts.atol is not None else problem.tolerance.atol,
            "rtol": opts.rtol if opts.rtol is not None else problem.tolerance.rtol,
        },
        "trials": opts.trials,
        **{key: getattr(result, key) for key in RESULT_FIGURES},
        "shapes": shapes,
        "generalizes": generalizes,
        "outside_verified": "warn" if generalizes else "error",
        "build": {"arch_flags": arch_flags, "cuda_agent": __version__},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
