"""A problem's task lint, cached once per problem content, and attached to every evaluation.

The lint (``worker/modes/problem_check.py``: ``zeros_pass``, ``constant_pass``,
``independent_of_inputs``, ``independent_of_weights``, ``nondeterministic``) says that a
trivial candidate could pass a problem, so a "correct" verdict on it says little. Computing it
costs a few reference forwards and one more construction of ``Model``, so it is done once per
problem content: the first evaluation of a problem asks its worker for it (the worker lints the
reference it already built, before any candidate code is imported: ``worker/problem_lint.py``),
and this module stores the answer under ``$CUDA_AGENT_CACHE/problem_lint/``. Later evaluations
of the same problem find it there and the worker does no extra work.

The cache key is the problem's content hash, the backend, the precision policy and the
tolerance (atol, rtol): what decides whether two outputs "match". ``attach`` puts the flags on
the result as ``problem_flags`` (``[]``: linted, clean; ``None``: unknown, e.g. the build failed
before any worker ran and no evaluation has linted the problem yet, or the lint itself failed,
which is cached too so that it is not retried on every evaluation) and adds a warning when
there are flags. Nothing here changes a verdict or a reward.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root, ensure_dir
from cuda_agent.core.records import EvaluationRecord
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions

LINT_VERSION = "2"  # 2: modules run in the mode their constructor left (training)
MEANINGS = {
    "zeros_pass": "an all-zeros output passes",
    "constant_pass": "a constant output passes",
    "independent_of_inputs": "the output does not depend on the inputs",
    "independent_of_weights": "the output does not depend on the weights",
    "nondeterministic": "the reference itself is not deterministic within the tolerance",
}
log = logging.getLogger(__name__)


def lint_dir() -> Path:
    return cache_root() / "problem_lint"


def cache_key(problem: Problem, opts: EvalOptions) -> str:
    atol = opts.atol if opts.atol is not None else problem.tolerance.atol
    rtol = opts.rtol if opts.rtol is not None else problem.tolerance.rtol
    parts = [LINT_VERSION, problem.content_hash, opts.backend, opts.precision, f"{atol!r}"]
    parts.append(f"{rtol!r}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def cached_lint(problem: Problem, opts: EvalOptions) -> dict[str, Any] | None:
    """The cached entry (``{"lint": [...], ...}``) of ``problem`` under ``opts``, or None."""
    path = lint_dir() / f"{cache_key(problem, opts)}.json"
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) and _valid(entry) else None


def lint_wanted(problem: Problem, opts: EvalOptions) -> bool:
    """Whether the evaluation's worker should lint the problem (no cached entry yet)."""
    return cached_lint(problem, opts) is None


def store_lint(problem: Problem, opts: EvalOptions, entry: dict[str, Any]) -> None:
    data = {**entry, "problem_id": problem.id, "problem_hash": problem.content_hash}
    folder = ensure_dir(lint_dir())
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
    os.replace(tmp, folder / f"{cache_key(problem, opts)}.json")


def attach(
    result: EvalResult, problem: Problem, opts: EvalOptions, record: EvaluationRecord | None
) -> None:
    """Store a fresh lint from the worker's ``record`` (if any), then set
    ``result.problem_flags`` from the cache and warn when the problem is degenerate."""
    fresh = record.problem_lint if record is not None else None
    if isinstance(fresh, dict) and _valid(fresh):
        try:
            if not fresh.get("partial"):
                store_lint(problem, opts, fresh)
        except OSError as err:  # a read-only cache costs a relint next time, nothing else
            log.warning("problem lint cache not written: %s", err)
        entry: dict[str, Any] | None = fresh
    else:
        entry = cached_lint(problem, opts)
    if isinstance(fresh, dict) and fresh.get("seconds") is not None:
        result.details.problem_lint_s = fresh["seconds"]
    if entry is None or entry["lint"] is None:  # not linted yet, or the lint itself failed
        result.problem_flags = None
        return
    flags = [str(f) for f in entry["lint"]]
    result.problem_flags = flags
    if flags:
        result.warnings.append(lint_warning(flags))


def _valid(entry: dict[str, Any]) -> bool:
    """A lint entry: its findings (a list), or None with the error that stopped the lint."""
    lint = entry.get("lint", False)
    return isinstance(lint, list) or (lint is None and isinstance(entry.get("error"), str))


def lint_warning(flags: list[str]) -> str:
    meanings = "; ".join(MEANINGS.get(f, f) for f in flags)
    return (
        f"degenerate problem ({', '.join(flags)}): {meanings}. A trivial candidate could pass "
        "it, so a correct verdict and its speed-up say little about the kernel"
    )
