"""Our verdicts beside KernelBench's, problem by problem, and why they differ.

``compare_verdicts`` joins a run's chosen attempts with KernelBench's verdicts
(``kb_results.their_verdicts``) into rows: both correct, both rejected, only ours correct,
only theirs correct, or missing on one side. Each disagreement gets a *reason class* named
from our result's flags, error stage and message (when we reject) or from KernelBench's error
kind (when they do); the classes are the table ``OUR_REASONS`` / ``THEIR_REASONS`` below, in
order, first match wins, and a disagreement that matches none is ``unclassified``. The class
``false build failure`` (we failed to build a source that stock ``load_inline`` built, as
KernelBench's side recorded it) must never occur; it is counted on agreements too (both
reject, but we for a build failure that stock torch did not have).

KernelBench's verdicts can come at several tolerances (``correct_at`` of the compat suite's
rows: one evaluation, the loosest first): the comparison at the primary tolerance is the one
above; ``KernelBenchComparison.at`` holds the same join at each other tolerance, where a
disagreement that exists only there (KernelBench accepts at the primary tolerance, rejects at a
stricter one, and we accept) is named ``tolerance (KernelBench today: 1e-4)`` (or the tolerance
it was). When KernelBench's own reference model raised on the inputs KernelBench made for it
(it casts every input tensor to the float precision: integer class targets, boolean masks),
KernelBench's rejection is named ``KernelBench's reference fails on its own inputs``.

This module only compares verdicts; rendering is the caller's (``bench report --compare``,
``benchmarks/compat``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.bench.kb_results import (
    KB_RESULTS_FILE,
    TheirVerdict,
    problem_number,
    their_verdicts,
)
from cuda_agent.bench.records import RESULTS_FILE, AttemptRecord, chosen_attempts
from cuda_agent.core.types import EvalResult

UNCLASSIFIED = "unclassified"
FALSE_BUILD_FAILURE = "false build failure"
REFERENCE_FAILS = "KernelBench's reference fails on its own inputs"
TOLERANCE_TODAY = "tolerance (KernelBench today: 1e-4)"
MAX_DETAIL = 240
_BUILD_WORDS = re.compile(r"(?i)\bbuild\b|\bbuilt\b|compil(?:e|ation|er) (?:error|failed)|error:")


@dataclass
class _Ours:
    flags: list[str]
    stage: str
    message: str
    builds: list[dict[str, Any]]
    stock_build: str | None = None  # KernelBench's side: did stock load_inline build it

    def has(self, *names: str) -> bool:
        return any(f in names for f in self.flags)

    def prefixed(self, *prefixes: str) -> bool:
        return any(f.startswith(prefixes) for f in self.flags)


def _fallback(o: _Ours) -> bool:
    failed_build = any(isinstance(b, dict) and b.get("ok") is False for b in o.builds)
    failed_build = failed_build or o.stock_build == "failed"
    return o.has("no_custom_kernel") and (failed_build or bool(_BUILD_WORDS.search(o.message)))


def _mismatch(*kinds: str) -> Callable[[_Ours], bool]:
    return lambda o: o.has(*(f"output_mismatch:{k}" for k in kinds))


OUR_REASONS: list[tuple[str, Callable[[_Ours], bool]]] = [
    ("no solution", lambda o: o.has("no_solution")),
    ("fallback to PyTorch after a failed build", _fallback),
    ("no custom kernel ran", lambda o: o.has("no_custom_kernel")),
    ("custom kernels idle", lambda o: o.has("custom_kernels_idle")),
    (FALSE_BUILD_FAILURE, lambda o: o.stage == "build" and o.stock_build == "ok"),
    (
        "fails to build with stock torch too (fallback reported as a build error)",
        lambda o: o.stage == "build" and o.stock_build == "failed",
    ),
    (
        "build failure of an extension the solution never built with stock torch",
        lambda o: o.stage == "build" and o.stock_build == "none",
    ),
    ("build failure (stock build not known)", lambda o: o.stage == "build"),
    (
        "a name taken from the problem's file (strict: a module of its own)",
        lambda o: "is defined by the problem's file" in o.message,
    ),
    ("in-place input mutation", lambda o: o.has("input_mutated")),
    ("parameter mutation in forward", lambda o: o.has("param_mutated")),
    (
        "weights not transferred / init-value only",
        lambda o: (
            o.prefixed("weights_", "init_value")
            or (o.stage == "load" and "load_state_dict" in o.message)
        ),
    ),
    ("wrong output in a checked timing call", lambda o: o.has("timed_output_mismatch")),
    ("NaN/Inf where the reference has none", _mismatch("nan", "inf")),
    ("wrong on the memory check's own seed", _mismatch("check_seed")),
    ("numerics beyond tolerance", _mismatch("value", "exact")),
    (
        "output type/shape/dtype/layout",
        lambda o: o.prefixed("output_mismatch:"),
    ),
    ("global torch switch changed", lambda o: o.prefixed("global_state_changed:")),
    ("forbidden torch op", lambda o: o.prefixed("forbidden_op:")),
    ("threads or processes left running", lambda o: o.has("threads_started", "processes_started")),
    ("work outside the timed stream", lambda o: o.has("work_outside_timed_stream")),
    ("custom kernel skipped in timing", lambda o: o.has("custom_kernel_skipped_in_timing")),
    (
        "harness tampering",
        lambda o: o.prefixed("harness_patched:", "reference_"),
    ),
    ("device budget exceeded", lambda o: o.has("device_budget_exceeded")),
    ("host memory cap", lambda o: o.has("memory_cap")),
    ("killed by the host's OOM killer", lambda o: o.has("host_oom")),
    ("GPU memory held by other processes", lambda o: o.has("device_memory_contention")),
    ("timeout", lambda o: o.has("timeout")),
    ("crash", lambda o: o.has("crashed")),
    ("forward raised", lambda o: o.has("forward_raised")),
    ("load failed", lambda o: o.stage == "load"),
    ("problem broken", lambda o: o.stage == "problem"),
]
THEIR_REASONS: dict[str, str] = {
    "build": "KernelBench build failure (ours built)",
    "mismatch": "KernelBench output mismatch",
    "shape": "KernelBench shape mismatch",
    "runtime": "KernelBench runtime error",
    "timeout": "KernelBench timeout",
    "crash": "KernelBench process crashed",
    "no_result": "KernelBench gave no result",
}
# KernelBench's evaluations share the GPU (its jobs and ours); the message names who held what
THEIR_OUT_OF_MEMORY = "KernelBench out of GPU memory (GPU shared)"


def tolerance_reason(key: str) -> str:
    """The class of a disagreement that exists only at the stricter tolerance ``key``."""
    if key in ("native", "0.0001"):  # KernelBench's fp32 tolerance today
        return TOLERANCE_TODAY
    return f"tolerance (KernelBench at {key})"


@dataclass
class Row:
    problem_id: str
    level: int | None
    outcome: str  # agree_correct, agree_rejected, ours_only, theirs_only, missing_*
    theirs: TheirVerdict | None = None
    ours: EvalResult | None = None
    reason: str | None = None
    detail: str = ""
    our_flags: list[str] = field(default_factory=list)
    problem_flags: list[str] | None = None

    @property
    def disagrees(self) -> bool:
        return self.outcome in ("ours_only", "theirs_only")

    def our_label(self) -> str:
        if self.ours is None:
            return "-"
        if self.ours.correct:
            return "correct"
        stage = self.ours.error.stage if self.ours.error is not None else None
        return f"rejected ({stage})" if stage else "rejected"

    def to_dict(self) -> dict[str, Any]:
        return {
            "problem_id": self.problem_id,
            "level": self.level,
            "outcome": self.outcome,
            "theirs": self.theirs.to_dict() if self.theirs else None,
            "ours": self.our_label(),
            "our_flags": self.our_flags,
            "problem_flags": self.problem_flags,
            "reason": self.reason,
            "detail": self.detail,
        }


def compare_verdicts(
    chosen: dict[str, AttemptRecord], theirs: dict[str, TheirVerdict], at: str | None = None
) -> tuple[list[Row], dict[str, Any]]:
    """The joined rows (ordered by level, then id) and their counts; ``at``: KernelBench's
    verdicts at that tolerance (``tolerance_key``) instead of its primary ones."""
    rows = [
        _row(pid, chosen.get(pid), theirs.get(pid), at)
        for pid in sorted(set(chosen) | set(theirs), key=lambda p: _order(p, chosen))
    ]
    return rows, summarise(rows)


@dataclass
class AtTolerance:
    """The join with KernelBench's verdicts at one more tolerance."""

    key: str
    rows: list[Row]
    counts: dict[str, Any]


@dataclass
class KernelBenchComparison:
    """A KernelBench results file beside a run: rows, counts, and a metrics row (pass rate);
    ``tolerance``: the primary tolerance's key where the results name it; ``at``: the same join
    at each other tolerance the results have verdicts for."""

    label: str
    rows: list[Row]
    counts: dict[str, Any]
    metrics: dict[str, Any]
    tolerance: str | None = None
    at: list[AtTolerance] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"counts": self.counts, "rows": [r.to_dict() for r in self.rows]}
        if self.tolerance is not None:
            out["tolerance"] = self.tolerance
        if self.at:
            out["at"] = {
                a.key: {"counts": a.counts, "rows": [r.to_dict() for r in a.rows if r.reason]}
                for a in self.at
            }
        return out


def kernelbench_comparison(
    path: Path, records: list[AttemptRecord], level: int | None = None
) -> KernelBenchComparison:
    """Compare a run's chosen attempts with the KernelBench results at ``path``."""
    chosen = chosen_attempts(records)
    theirs = their_verdicts(path, {pid: r.level for pid, r in chosen.items()}, level)
    rows, counts = compare_verdicts(chosen, theirs)
    n = len(chosen)
    correct = sum(1 for pid in chosen if pid in theirs and theirs[pid].correct)
    overall = {"n": n, "pass_rate": correct / n if n else None}
    primary, others = _tolerances(theirs.values())
    at = [AtTolerance(key, *compare_verdicts(chosen, theirs, key)) for key in others]
    return KernelBenchComparison(
        f"KernelBench ({path.name})",
        rows,
        counts,
        {"overall": overall, "levels": {}},
        primary,
        at,
    )


def _tolerances(verdicts: Any) -> tuple[str | None, list[str]]:
    """The primary tolerance's key (the most common) and the other keys, in order seen."""
    primary = Counter(v.tolerance for v in verdicts if v.tolerance is not None).most_common(1)
    key = primary[0][0] if primary else None
    others: dict[str, None] = {}
    for verdict in verdicts:
        others.update(dict.fromkeys(k for k in verdict.correct_at or {} if k != key))
    return key, list(others)


def is_kernelbench_results(spec: str) -> bool:
    """Whether ``spec`` names a KernelBench results file (not a run folder, not paper:...)."""
    path = Path(spec)
    if path.is_file():
        return True
    return (
        path.is_dir() and (path / KB_RESULTS_FILE).is_file() and not (path / RESULTS_FILE).exists()
    )


def summarise(rows: list[Row]) -> dict[str, Any]:
    outcomes = Counter(r.outcome for r in rows)
    reasons = Counter(r.reason for r in rows if r.disagrees and r.reason)
    agree = outcomes["agree_correct"] + outcomes["agree_rejected"]
    disagree = outcomes["ours_only"] + outcomes["theirs_only"]
    return {
        "problems": len(rows),
        "compared": agree + disagree,  # a verdict on both sides (at the tolerance compared)
        "agree": agree,
        "disagree": disagree,
        "outcomes": {k: outcomes[k] for k in sorted(outcomes)},
        "ours_correct": outcomes["agree_correct"] + outcomes["ours_only"],
        "theirs_correct": outcomes["agree_correct"] + outcomes["theirs_only"],
        "reasons": dict(reasons.most_common()),
        "unclassified": reasons[UNCLASSIFIED],
        "false_build_failures": sum(1 for r in rows if r.reason == FALSE_BUILD_FAILURE),
    }


def our_reason(result: EvalResult, theirs: TheirVerdict | None = None) -> str:
    """The reason class of our rejection of a solution KernelBench accepted (``theirs``
    tells whether stock torch built the solution's extension, where known)."""
    error = result.error
    ours = _Ours(
        flags=list(result.flags),
        stage=error.stage if error is not None else "",
        message=error.message if error is not None else "",
        builds=result.builds,
        stock_build=theirs.stock_build if theirs is not None else None,
    )
    return next((name for name, test in OUR_REASONS if test(ours)), UNCLASSIFIED)


def their_reason(verdict: TheirVerdict) -> str:
    """The reason class of KernelBench's rejection of a solution we accepted."""
    if verdict.reference_error:
        return REFERENCE_FAILS
    if verdict.kind == "runtime" and "CUDA out of memory" in verdict.message:
        return THEIR_OUT_OF_MEMORY
    return THEIR_REASONS.get(verdict.kind, UNCLASSIFIED)


def _row(
    pid: str, record: AttemptRecord | None, theirs: TheirVerdict | None, at: str | None = None
) -> Row:
    ours = record.result if record is not None else None
    row = Row(pid, record.level if record is not None else None, "", theirs, ours)
    if record is not None:
        row.our_flags = list(record.result.flags)
        row.problem_flags = record.problem_flags
    theirs_at: bool | None = None  # their verdict at the tolerance compared; None: none there
    if theirs is not None:
        theirs_at = theirs.correct if at is None else theirs.correct_at_key(at)
    if ours is None or theirs is None or theirs_at is None:
        row.outcome = "missing_ours" if ours is None else "missing_theirs"
        return row
    ours_ok, theirs_ok = ours.correct, theirs_at
    if ours_ok == theirs_ok:
        row.outcome = "agree_correct" if ours_ok else "agree_rejected"
        if not ours_ok and our_reason(ours, theirs) == FALSE_BUILD_FAILURE:
            row.reason = FALSE_BUILD_FAILURE  # both reject, but stock torch built it
    elif theirs_ok:
        row.outcome, row.reason = "theirs_only", our_reason(ours, theirs)
        row.detail = _short(ours.error.message if ours.error is not None else "")
    elif at is not None and theirs.correct:  # they reject only at this (stricter) tolerance
        row.outcome, row.reason = "ours_only", tolerance_reason(at)
        difference = (theirs.max_difference_at or {}).get(at)
        diff = f" (max difference {difference:.3g})" if difference else ""
        row.detail = f"KernelBench accepts at {theirs.tolerance}, rejects at {at}{diff}"
    else:
        row.outcome, row.reason = "ours_only", their_reason(theirs)
        diff = f" (max difference {theirs.max_difference:.3g})" if theirs.max_difference else ""
        message = theirs.message + diff
        if theirs.reference_error:
            message = f"{theirs.reference_error} ({theirs.message})"
        row.detail = _short(message)
    return row


def _order(pid: str, chosen: dict[str, AttemptRecord]) -> tuple[int, int, str]:
    record = chosen.get(pid)
    id_level, number = problem_number(pid)
    level = record.level if record is not None and record.level is not None else id_level
    last = 1 << 20
    return (last if level is None else level, last if number is None else number, pid)


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"
