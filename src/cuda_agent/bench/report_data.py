"""A run folder as plain data for the HTML report: every table, figure and section, formatted.

``report_data`` reads a run folder (``run.json``, ``results.jsonl``, the agent attempts'
trajectories) and returns a ``ReportData``: the header (run information, counts), the
paper-style metrics table (this run, this run without lint-flagged problems, comparison rows),
the task-lint summary, the fast_p table, the speed-up distributions (values, log2 bins and a
summary line), the per-problem rows, the KernelBench comparisons (``report_kb``) and the
trajectory views (``report_trajectory``). Numbers come already formatted as the page shows
them, along with the sort keys of the sortable tables.

It builds no HTML and escapes nothing (the templates do), draws nothing (``report_plots``
does), computes no metrics of its own (``metrics.compute_metrics`` does) and writes nothing.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.bench.agreement import KernelBenchComparison
from cuda_agent.bench.metrics import FAST_P, compute_metrics
from cuda_agent.bench.records import (
    AttemptRecord,
    chosen_attempts,
    isolation_summary,
    read_records,
    read_run_info,
)
from cuda_agent.bench.report_format import (
    as_number,
    compact,
    fmt_metric,
    fmt_pct,
    fmt_us,
    fmt_x,
    level_name,
    truncate,
    verdict,
)
from cuda_agent.bench.report_kb import KbComparisonView, kernelbench_views
from cuda_agent.bench.report_trajectory import TrajectoryView, trajectory_anchor, trajectory_view

MAX_ERROR = 400  # characters of an error message in the per-problem table
HIST_MIN_LOG2, HIST_MAX_LOG2, HIST_BINS_PER_OCTAVE = -4, 4, 2

METRIC_COLUMNS = (
    ("pass_rate", "Pass", "pct"),
    ("faster_rate_eager", "Faster vs eager", "pct"),
    ("faster_rate_compile", "Faster vs compile", "pct"),
    ("geomean_speedup_eager", "Speed-up vs eager", "x"),
    ("geomean_speedup_compile", "Speed-up vs compile", "x"),
)
RUN_INFO_KEYS = (
    ("problem_set", "Problem set"),
    ("backend", "Backend"),
    ("model", "Model"),
    ("solutions", "Solutions"),
    ("started", "Started"),
    ("problems", "Problems in the set"),
)
INFO_LABELS = {  # run.json's other keys whose name alone would read oddly
    "fingerprint": "Judged under",
    "jobs_per_device": "Jobs per device",
}
DISTRIBUTIONS = (("speedup_eager", "eager"), ("speedup_compile", "torch.compile"))
PROBLEM_COLUMNS = (
    "Problem",
    "Level",
    "Attempt",
    "Verdict",
    "Reward",
    "Runtime (µs)",
    "Eager (µs)",
    "Compile (µs)",
    "vs eager",
    "vs compile",
    "Flags",
    "Problem flags",
    "Trajectory",
)


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True)
class Subset:
    key: str  # "overall" or a level ("1", "none")
    name: str  # "Overall", "Level 1", "No level"
    n: int


@dataclass(frozen=True)
class MetricsRow:
    label: str
    this_run: bool  # this run (or its unflagged problems), not a comparison row
    groups: list[list[str]]  # per subset, the METRIC_COLUMNS values as shown


@dataclass(frozen=True)
class MetricsTable:
    subsets: list[Subset]
    columns: list[str]  # the METRIC_COLUMNS titles, repeated under each subset
    rows: list[MetricsRow]


@dataclass(frozen=True)
class LintSummary:
    flagged: int
    clean: int
    unknown: int
    problems: list[tuple[str, list[str]]]  # flagged problem, its flags


@dataclass(frozen=True)
class FastPRow:
    name: str
    n: int
    rates: list[str]  # per FastPTable.keys
    mean_reward: str


@dataclass(frozen=True)
class FastPTable:
    keys: list[str]  # "0", "0.8", "1", "1.5", "2"
    rows: list[FastPRow]


@dataclass(frozen=True)
class Bin:
    """A histogram bin, ``lo`` to ``hi`` in log2 of the speed-up."""

    lo: float
    hi: float
    count: int

    @property
    def faster(self) -> bool:
        return self.lo >= 0

    @property
    def tip(self) -> str:
        return f"{2**self.lo:.3g}x to {2**self.hi:.3g}x: {self.count} problem(s)"


@dataclass(frozen=True)
class Distribution:
    field: str  # the result's field, e.g. speedup_eager
    label: str  # the x axis, e.g. "Speed-up vs eager (log2 scale)"
    values: list[float]
    bins: list[Bin]
    summary: str  # "n=3, geomean 1.06x, median 1.20x"


@dataclass(frozen=True)
class Cell:
    text: str
    sort: str  # the sort key of the sortable table ("" sorts last)


@dataclass(frozen=True)
class ProblemRow:
    problem_id: str
    anchor: str | None  # of its trajectory section, if it has one
    level: Cell
    attempt: Cell
    verdict: str
    status: str  # ok / fail
    error: str | None  # a failure's error message, cut to MAX_ERROR
    numbers: list[Cell]  # reward, runtime, eager, compile, speed-up vs eager, vs compile
    flags: list[str]
    problem_flags: list[str] | None  # None: not linted

    @property
    def degenerate(self) -> bool:
        return bool(self.problem_flags)

    @property
    def flags_sort(self) -> str:
        return " ".join(self.flags)

    @property
    def problem_flags_sort(self) -> str:
        return "?" if self.problem_flags is None else " ".join(self.problem_flags)


@dataclass(frozen=True)
class ReportData:
    title: str
    header: list[tuple[str, str]]
    metrics: MetricsTable
    lint: LintSummary | None
    fast_p: FastPTable
    distributions: list[Distribution]
    problems: list[ProblemRow]
    kernelbench: list[KbComparisonView]
    trajectories: list[TrajectoryView]


def report_data(
    run_dir: Path,
    comparisons: Sequence[tuple[str, dict[str, Any]]] = (),
    kernelbench: Sequence[KernelBenchComparison] = (),
    now: _dt.datetime | None = None,
) -> ReportData:
    """Everything the report page of ``run_dir`` shows (``now``: when it was generated)."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    records = read_records(run_dir)
    chosen = chosen_attempts(records)
    metrics = compute_metrics(chosen)
    ordered = sorted(chosen.values(), key=problem_order)
    run_label = str(info.get("label") or run_dir.name or "this run")
    subsets = metric_subsets(metrics)
    return ReportData(
        title=f"Benchmark report: {run_label}",
        header=header_items(run_dir, info, records, chosen, now),
        metrics=metrics_table(run_label, metrics, subsets, comparisons),
        lint=lint_summary(metrics),
        fast_p=fast_p_table(metrics, subsets),
        distributions=[distribution(ordered, f, name) for f, name in DISTRIBUTIONS],
        problems=problem_rows(ordered, records),
        kernelbench=kernelbench_views(kernelbench),
        trajectories=[trajectory_view(run_dir, r) for r in ordered if r.trajectory],
    )


def problem_order(record: AttemptRecord) -> tuple[int, int, str]:
    """Sort key of the report's problems: by level (no level last), then by id."""
    level = record.level
    return (level is None, level if isinstance(level, int) else 0, record.problem_id)


# --------------------------------------------------------------------------- header


def header_items(
    run_dir: Path,
    info: dict[str, Any],
    records: list[AttemptRecord],
    chosen: dict[str, AttemptRecord],
    now: _dt.datetime | None = None,
) -> list[tuple[str, str]]:
    """(label, value) pairs: isolation, run folder, the run's information, counts, date."""
    items = [("Isolation", isolation_summary(records)), ("Run folder", str(run_dir))]
    known = dict(RUN_INFO_KEYS)
    for key, label in RUN_INFO_KEYS:
        if info.get(key) not in (None, ""):
            items.append((label, _info_value(key, info[key])))
    for key, value in info.items():
        if key not in known and key != "label" and value not in (None, ""):
            label = INFO_LABELS.get(key) or key.replace("_", " ").capitalize()
            items.append((label, _info_value(key, value)))
    n_correct = sum(1 for r in chosen.values() if r.correct)
    generated = (now or _dt.datetime.now()).astimezone()
    items += [
        ("Problems judged", f"{len(chosen)} ({n_correct} solved)"),
        ("Attempts", str(len(records))),
        ("Report generated", generated.strftime("%Y-%m-%d %H:%M %Z")),
    ]
    return items


def _info_value(key: str, value: Any) -> str:
    if key == "started" and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            stamp = _dt.datetime.fromtimestamp(float(value), tz=_dt.timezone.utc)
            return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):
            return str(value)
    if key == "utilization" and isinstance(value, dict):
        return _utilization(value)
    if isinstance(value, list) and all(_scalar(v) for v in value):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, dict) and all(_scalar(v) for v in value.values()):
        return "; ".join(f"{str(k).replace('_', ' ')} {v}" for k, v in value.items()) or "none"
    if isinstance(value, dict | list):
        return compact(value, 500)
    return str(value)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _utilization(figures: dict[str, Any]) -> str:
    """The line ``bench run`` printed (``cluster/ledger.describe``); JSON if it is not whole."""
    from cuda_agent.cluster.ledger import describe

    try:
        return describe(figures)
    except (KeyError, TypeError, ValueError):
        return compact(figures, 500)


# --------------------------------------------------------------------------- metrics


def subset_metrics(metrics: dict[str, Any], key: str) -> dict[str, Any]:
    """The metrics of one subset (``overall`` or a level's key); empty where there are none."""
    levels = metrics.get("levels") or {}
    value = metrics.get("overall") if key == "overall" else levels.get(key)
    return value if isinstance(value, dict) else {}


def metric_subsets(metrics: dict[str, Any]) -> list[Subset]:
    """Overall, then each level of ``metrics``, with its display name and size."""
    keys = [("overall", "Overall")]
    keys += [(lv, level_name(lv)) for lv in (metrics.get("levels") or {})]
    return [Subset(key, name, int(subset_metrics(metrics, key).get("n", 0))) for key, name in keys]


def metrics_table(
    run_label: str,
    metrics: dict[str, Any],
    subsets: list[Subset],
    comparisons: Sequence[tuple[str, dict[str, Any]]],
) -> MetricsTable:
    """The paper-style table: this run, this run without flagged problems, the comparisons
    (over this run's subsets: a comparison without a subset shows ``-``)."""

    def row(label: str, m: dict[str, Any], this_run: bool) -> MetricsRow:
        groups = [
            [fmt_metric(subset_metrics(m, s.key).get(f), kind) for f, _, kind in METRIC_COLUMNS]
            for s in subsets
        ]
        return MetricsRow(label, this_run, groups)

    rows = [row(run_label, metrics, True)]
    unflagged = metrics.get("no_lint_flag")
    if isinstance(unflagged, dict):
        rows.append(row(f"{run_label}: problems with no lint flag", unflagged, True))
    rows += [row(label, m, False) for label, m in comparisons]
    return MetricsTable(subsets, [title for _, title, _ in METRIC_COLUMNS], rows)


def lint_summary(metrics: dict[str, Any]) -> LintSummary | None:
    lint = metrics.get("problem_lint")
    if not isinstance(lint, dict):
        return None
    flagged = lint.get("flagged_problems") or {}
    return LintSummary(
        flagged=int(lint.get("flagged", 0)),
        clean=int(lint.get("clean", 0)),
        unknown=int(lint.get("unknown", 0)),
        problems=[(str(pid), [str(f) for f in flags]) for pid, flags in flagged.items()],
    )


def fast_p_table(metrics: dict[str, Any], subsets: list[Subset]) -> FastPTable:
    keys = [f"{p:g}" for p in FAST_P]
    rows = []
    for s in subsets:
        subset = subset_metrics(metrics, s.key)
        fast_p = subset.get("fast_p") or {}
        reward = as_number(subset.get("mean_reward"))
        rows.append(
            FastPRow(
                name=s.name,
                n=s.n,
                rates=[fmt_pct(as_number(fast_p.get(k))) for k in keys],
                mean_reward="-" if reward is None else f"{reward:.3f}",
            )
        )
    return FastPTable(keys, rows)


# --------------------------------------------------------------------------- distributions


def distribution(ordered: list[AttemptRecord], field: str, baseline: str) -> Distribution:
    """The positive ``field`` speed-ups of the correct attempts, in half-octave bins from 1/16x
    to 16x (values beyond counted in the end bins)."""
    values = [
        v
        for r in ordered
        if r.correct
        for v in [as_number(getattr(r.result, field))]
        if v is not None and v > 0
    ]
    return Distribution(
        field=field,
        label=f"Speed-up vs {baseline} (log2 scale)",
        values=values,
        bins=log2_bins(values),
        summary=distribution_summary(values),
    )


def log2_bins(values: list[float]) -> list[Bin]:
    n_bins = (HIST_MAX_LOG2 - HIST_MIN_LOG2) * HIST_BINS_PER_OCTAVE
    counts = [0] * n_bins
    for v in values:
        index = math.floor((math.log2(v) - HIST_MIN_LOG2) * HIST_BINS_PER_OCTAVE)
        counts[min(max(index, 0), n_bins - 1)] += 1
    width = 1 / HIST_BINS_PER_OCTAVE
    return [
        Bin(HIST_MIN_LOG2 + i * width, HIST_MIN_LOG2 + (i + 1) * width, count)
        for i, count in enumerate(counts)
    ]


def distribution_summary(values: list[float]) -> str:
    if not values:
        return "no correct attempts with this speed-up"
    geo = math.exp(sum(math.log(v) for v in values) / len(values))
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return f"n={len(values)}, geomean {geo:.2f}x, median {median:.2f}x"


# --------------------------------------------------------------------------- problems


def _sort_key(value: Any) -> str:
    return "" if value is None else str(value)


def problem_rows(ordered: list[AttemptRecord], records: list[AttemptRecord]) -> list[ProblemRow]:
    """One row per problem (its chosen attempt), in ``ordered``'s order."""
    attempts: dict[str, int] = {}
    for record in records:
        attempts[record.problem_id] = attempts.get(record.problem_id, 0) + 1
    return [problem_row(r, attempts.get(r.problem_id, 1)) for r in ordered]


def problem_row(record: AttemptRecord, n_attempts: int) -> ProblemRow:
    result = record.result
    text, status = verdict(result)
    message = None
    if not result.correct and result.error is not None and result.error.message:
        message, _ = truncate(result.error.message, MAX_ERROR)
    reward = as_number(result.reward)
    numbers = [Cell("-" if reward is None else f"{reward:.2f}", _sort_key(reward))]
    for us in (result.runtime_us, result.eager_us, result.compile_us):
        value = as_number(us)
        numbers.append(Cell(fmt_us(value), _sort_key(value)))
    for speedup in (result.speedup_eager, result.speedup_compile):
        value = as_number(speedup)
        numbers.append(Cell(fmt_x(value), _sort_key(value)))
    return ProblemRow(
        problem_id=record.problem_id,
        anchor=trajectory_anchor(record.problem_id) if record.trajectory else None,
        level=Cell("-" if record.level is None else str(record.level), _sort_key(record.level)),
        attempt=Cell(f"{record.source} #{record.attempt} of {n_attempts}", str(record.attempt)),
        verdict=text,
        status=status,
        error=message,
        numbers=numbers,
        flags=list(result.flags),
        problem_flags=record.problem_flags,
    )
