"""The one constructor of worker requests.

Every caller that runs a worker (the pipeline, the compile baseline, the shapes plan, the
problem check, the synthesis filters) builds its request here, from the shared settings
(``EvalSettings``, or the ``EvalOptions`` that extend them) and the problem. The settings go
into the request unchanged, except that a tolerance left open (None) becomes the problem's.
What one mode alone needs is passed by name (``batch=...``, ``prebuilt_module=...``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cuda_agent.core.types import Problem
from cuda_agent.evaluator.worker.protocol import MODES, EvalSettings, WorkerRequest


def worker_request(
    mode: str,
    settings: EvalSettings,
    problem: Problem | None,
    seed: int,
    **mode_fields: Any,
) -> WorkerRequest:
    """A request of ``mode`` for ``problem`` (None for a batch of sources: ``synth_check``)."""
    if mode not in MODES:
        raise ValueError(f"unknown worker mode {mode!r} (one of {', '.join(MODES)})")
    shared = settings.shared()
    if problem is not None:
        shared = replace(
            shared,
            atol=problem.tolerance.atol if shared.atol is None else shared.atol,
            rtol=problem.tolerance.rtol if shared.rtol is None else shared.rtol,
        )
    fields: dict[str, Any] = {}
    if problem is not None:
        fields.update(problem_id=problem.id, problem_source=problem.source)
    fields.update(mode_fields)
    fields.setdefault("problem_id", "")
    fields.setdefault("problem_source", "")
    return WorkerRequest(mode=mode, nonce="", settings=shared, seed=seed, **fields)
