"""A run folder as one self-contained HTML page: metrics, distributions, problems, trajectories.

``render_html`` reads a run folder (``run.json``, ``results.jsonl`` and the agent attempts'
``trajectory.jsonl`` files) and returns a single HTML page with inline CSS, inline SVG and a
little inline JavaScript, so it opens from ``file://`` with no network. The page holds:

1. a header with the run's information (problem set, backend, model or solutions, date, counts);
2. the paper-style table (Table 1: pass rate, faster rates and geomean speed-ups per subset) of
   this run, of this run over the problems with no task-lint flag, next to comparison rows
   (other runs' metrics or ``paper.paper_metrics``), the list of flagged (degenerate)
   problems, and a fast_p table of this run;
3. histograms of the speed-ups vs eager and vs torch.compile of the correct chosen attempts
   (log2 bins);
4. the per-problem table of the chosen attempts (verdict, reward, times, speed-ups, flags, the
   problem's lint flags, the error message of a failure), sortable by clicking a header;
   degenerate problems are marked, linking to
5. (with KernelBench results) KernelBench's verdicts beside ours (``report_kb.py``);
6. the trajectory viewer: one collapsible section per agent attempt with a trajectory, turn by
   turn (assistant messages, tool calls with their arguments, tool results, evaluations, exit).

Every piece of data is HTML-escaped; trajectories are embedded as escaped HTML, never as
executable JSON, and the script only sorts tables, opens linked sections and marks the page
ready. It does not evaluate anything, compute metrics of its own (``metrics.compute_metrics``
does), fetch anything, or modify the run folder (``write_html`` writes only ``out_file``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_agent.bench.agreement import KernelBenchComparison
from cuda_agent.bench.html_parts import el as _el
from cuda_agent.bench.html_parts import note as _note
from cuda_agent.bench.html_parts import section as _section
from cuda_agent.bench.html_parts import table as _table
from cuda_agent.bench.html_parts import txt as _txt
from cuda_agent.bench.metrics import FAST_P, compute_metrics
from cuda_agent.bench.records import (
    AttemptRecord,
    chosen_attempts,
    isolation_summary,
    read_records,
    read_run_info,
)
from cuda_agent.bench.report_kb import kernelbench_section

MAX_TOOL_OUTPUT = 6000  # characters of a tool result shown (head and tail)
MAX_TEXT = 20000  # characters of an assistant message or argument shown
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
)
_ERROR_LINE = re.compile(r"(?i)\b(error|fatal|undefined reference|traceback)\b")


# --------------------------------------------------------------------------- public API


def render_html(
    run_dir: Path,
    comparisons: Sequence[tuple[str, dict[str, Any]]] = (),
    kernelbench: Sequence[KernelBenchComparison] = (),
) -> str:
    """The report page of ``run_dir`` (with comparison rows ``(label, metrics)`` and
    KernelBench's verdicts beside ours, problem by problem) as a string."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    records = read_records(run_dir)
    chosen = chosen_attempts(records)
    metrics = compute_metrics(chosen)
    ordered = sorted(chosen.values(), key=_problem_order)
    with_traj = [r for r in ordered if r.trajectory]
    run_label = str(info.get("label") or run_dir.name or "this run")
    body = [
        _header(run_dir, info, records, chosen),
        _section("Metrics", "metrics", _metrics_section(run_label, metrics, comparisons)),
        _section("Speed-up distributions", "distributions", _distributions(ordered)),
        _section("Problems", "problems", _problem_table(ordered, records)),
    ]
    if kernelbench:
        body.append(_section("KernelBench", "kernelbench", kernelbench_section(kernelbench)))
    body.append(_section("Trajectories", "trajectories", _trajectories(run_dir, with_traj)))
    return _page(f"Benchmark report: {run_label}", "\n".join(body), bool(kernelbench))


def write_html(
    run_dir: Path,
    out_file: Path,
    comparisons: Sequence[tuple[str, dict[str, Any]]] = (),
    kernelbench: Sequence[KernelBenchComparison] = (),
) -> Path:
    """Render ``run_dir``'s report and write it to ``out_file`` (UTF-8); returns ``out_file``."""
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(render_html(Path(run_dir), comparisons, kernelbench), encoding="utf-8")
    return out_file


def trajectory_anchor(problem_id: str) -> str:
    """The element id of a problem's trajectory section (stable, safe in HTML and URLs)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", problem_id)
    if safe != problem_id or not safe:
        safe += "-" + hashlib.sha1(problem_id.encode("utf-8")).hexdigest()[:8]
    return "traj-" + safe


# --------------------------------------------------------------------------- formatting


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) < 10000 else f"{value:,.0f}"


def _fmt(value: Any, kind: str) -> str:
    number = _number(value)
    return fmt_pct(number) if kind == "pct" else fmt_x(number)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _truncate(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters (head and tail kept); also how many were cut."""
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    tail = limit - head
    return text[:head] + "\n[…]\n" + text[-tail:], len(text) - limit


def _compact(value: Any, limit: int = 300) -> str:
    try:
        text = json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _level_name(level: str) -> str:
    return "No level" if level == "none" else f"Level {level}"


def _problem_order(record: AttemptRecord) -> tuple[int, int, str]:
    level = record.level
    return (level is None, level if isinstance(level, int) else 0, record.problem_id)


# --------------------------------------------------------------------------- HTML helpers


# --------------------------------------------------------------------------- 1. header


def _header(
    run_dir: Path,
    info: dict[str, Any],
    records: list[AttemptRecord],
    chosen: dict[str, AttemptRecord],
) -> str:
    items = [("Isolation", isolation_summary(records)), ("Run folder", str(run_dir))]
    for key, label in RUN_INFO_KEYS:
        if info.get(key) not in (None, ""):
            items.append((label, _info_value(key, info[key])))
    for key, value in info.items():
        if key not in dict(RUN_INFO_KEYS) and key != "label" and value not in (None, ""):
            items.append((key.replace("_", " ").capitalize(), _info_value(key, value)))
    n_correct = sum(1 for r in chosen.values() if r.correct)
    items += [
        ("Problems", f"{len(chosen)} ({n_correct} solved)"),
        ("Attempts", str(len(records))),
        ("Report generated", _dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")),
    ]
    rows = "".join(_el("dt", _txt(k)) + _el("dd", _txt(v)) for k, v in items)
    title = f"Benchmark report: {info.get('label') or run_dir.name}"
    return _el("header", _el("h1", _txt(title)) + _el("dl", rows, {"class": "info"}))


def _info_value(key: str, value: Any) -> str:
    if key == "started" and isinstance(value, int | float) and not isinstance(value, bool):
        try:
            stamp = _dt.datetime.fromtimestamp(float(value), tz=_dt.timezone.utc)
            return stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
        except (OverflowError, OSError, ValueError):
            return str(value)
    if isinstance(value, dict | list):
        return _compact(value, 500)
    return str(value)


# --------------------------------------------------------------------------- 2. metrics


def _metrics_section(
    run_label: str, metrics: dict[str, Any], comparisons: Sequence[tuple[str, dict[str, Any]]]
) -> str:
    levels = list((metrics.get("levels") or {}).keys())
    subsets = [("overall", "Overall")] + [(lv, _level_name(lv)) for lv in levels]
    rows = [_metrics_row(run_label, metrics, subsets, this_run=True)]
    unflagged = metrics.get("no_lint_flag")
    if isinstance(unflagged, dict):
        label = f"{run_label}: problems with no lint flag"
        rows.append(_metrics_row(label, unflagged, subsets, this_run=True))
    rows += [_metrics_row(label, m, subsets, this_run=False) for label, m in comparisons]
    group_head = _el("th", "Run", {"rowspan": 2}) + "".join(
        _el(
            "th",
            _txt(f"{name} (n={_subset(metrics, key).get('n', 0)})"),
            {"colspan": len(METRIC_COLUMNS), "class": "group"},
        )
        for key, name in subsets
    )
    col_head = "".join(
        _el("th", _txt(title), {"class": "group-start" if i == 0 else None})
        for _ in subsets
        for i, (_, title, _) in enumerate(METRIC_COLUMNS)
    )
    paper = _table(
        [_el("tr", group_head), _el("tr", col_head)], rows, {"class": "paper", "id": "table-1"}
    )
    caption = _note(
        "Rates are over all problems of the subset; speed-ups are geometric means over the "
        "correct solutions (chosen attempt per problem). Comparison rows other than this run "
        "come from their own sources (e.g. the paper's Table 1), with their own problem counts."
    )
    return (
        paper
        + caption
        + _lint_note(metrics)
        + _el("h3", "fast_p (this run)")
        + _fast_p_table(metrics, subsets)
    )


def _lint_note(metrics: dict[str, Any]) -> str:
    lint = metrics.get("problem_lint")
    if not isinstance(lint, dict):
        return ""
    flagged = lint.get("flagged_problems") or {}
    text = (
        f"Task lint: {lint.get('flagged', 0)} problem(s) flagged as degenerate (a trivial "
        f"kernel could pass them), {lint.get('clean', 0)} clean, {lint.get('unknown', 0)} not "
        "linted (counted as unflagged). The second row of this run leaves the flagged out."
    )
    items = "".join(
        _el("li", _txt(pid) + " " + _lint_flags(flags)) for pid, flags in flagged.items()
    )
    return _note(text) + (_el("ul", items, {"class": "lint"}) if items else "")


def _lint_flags(flags: list[str]) -> str:
    return "".join(_el("span", _txt(f), {"class": "flag lint"}) for f in flags)


def _subset(metrics: dict[str, Any], key: str) -> dict[str, Any]:
    levels = metrics.get("levels") or {}
    value = metrics.get("overall") if key == "overall" else levels.get(key)
    return value if isinstance(value, dict) else {}


def _metrics_row(
    label: str, metrics: dict[str, Any], subsets: list[tuple[str, str]], this_run: bool
) -> str:
    cells = [_el("th", _txt(label), {"scope": "row"})]
    for key, _ in subsets:
        subset = _subset(metrics, key)
        for i, (field, _, kind) in enumerate(METRIC_COLUMNS):
            cells.append(
                _el(
                    "td",
                    _txt(_fmt(subset.get(field), kind)),
                    {"class": "num group-start" if i == 0 else "num"},
                )
            )
    return _el("tr", "".join(cells), {"class": "this-run" if this_run else "comparison"})


def _fast_p_table(metrics: dict[str, Any], subsets: list[tuple[str, str]]) -> str:
    keys = [f"{p:g}" for p in FAST_P]
    head = (
        _el("th", "Subset")
        + _el("th", "n")
        + "".join(_el("th", _txt(f"fast_{k}")) for k in keys)
        + _el("th", "Mean reward")
    )
    rows = []
    for key, name in subsets:
        subset = _subset(metrics, key)
        fast_p = subset.get("fast_p") or {}
        reward = _number(subset.get("mean_reward"))
        cells = _el("th", _txt(name), {"scope": "row"}) + _el(
            "td", _txt(subset.get("n", 0)), {"class": "num"}
        )
        cells += "".join(
            _el("td", _txt(fmt_pct(_number(fast_p.get(k)))), {"class": "num"}) for k in keys
        )
        cells += _el("td", _txt("-" if reward is None else f"{reward:.3f}"), {"class": "num"})
        rows.append(_el("tr", cells))
    table = _table([_el("tr", head)], rows, {"class": "fastp"})
    return table + _note("fast_p: correct and speed-up vs eager > p, over all problems.")


# --------------------------------------------------------------------------- 3. histograms


def _distributions(ordered: list[AttemptRecord]) -> str:
    figures = []
    for field, name in (("speedup_eager", "eager"), ("speedup_compile", "torch.compile")):
        values = [
            v
            for r in ordered
            if r.correct
            for v in [_number(r.result.get(field))]
            if v is not None and v > 0
        ]
        figures.append(_histogram(values, f"Speed-up vs {name} (log2 scale)"))
    return _el("div", "".join(figures), {"class": "figures"}) + _note(
        "Correct chosen attempts only; bins are half-octaves (factors of √2); values beyond "
        "1/16x or 16x are counted in the end bins. The dashed line marks 1x."
    )


def _tick_label(k: int) -> str:
    return f"{2**k}x" if k >= 0 else f"1/{2**-k}x"


def _histogram(values: list[float], x_label: str) -> str:
    width, height = 560, 270
    left, right, top, bottom = 52, 16, 30, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    n_bins = (HIST_MAX_LOG2 - HIST_MIN_LOG2) * HIST_BINS_PER_OCTAVE
    counts = [0] * n_bins
    for v in values:
        index = math.floor((math.log2(v) - HIST_MIN_LOG2) * HIST_BINS_PER_OCTAVE)
        counts[min(max(index, 0), n_bins - 1)] += 1
    top_count = max(counts, default=0)
    step = max(1, math.ceil(top_count / 5))
    y_max = max(step * math.ceil(top_count / step), 1)
    bin_w = plot_w / n_bins

    def x_of(log2_value: float) -> float:
        return left + (log2_value - HIST_MIN_LOG2) * HIST_BINS_PER_OCTAVE * bin_w

    def y_of(count: float) -> float:
        return top + plot_h - count / y_max * plot_h

    parts = [
        _el(
            "rect", "", {"x": left, "y": top, "width": plot_w, "height": plot_h, "class": "plot-bg"}
        )
    ]
    for tick in range(0, y_max + 1, step):
        y = f"{y_of(tick):.1f}"
        parts.append(
            _el("line", "", {"x1": left, "x2": left + plot_w, "y1": y, "y2": y, "class": "grid"})
        )
        parts.append(_el("text", _txt(tick), {"x": left - 6, "y": y, "class": "ytick"}))
    for i, count in enumerate(counts):
        lo = HIST_MIN_LOG2 + i / HIST_BINS_PER_OCTAVE
        hi = lo + 1 / HIST_BINS_PER_OCTAVE
        bar_h = count / y_max * plot_h
        tip = f"{2**lo:.3g}x to {2**hi:.3g}x: {count} problem(s)"
        parts.append(
            _el(
                "rect",
                _el("title", _txt(tip)),
                {
                    "x": f"{x_of(lo) + 1:.1f}",
                    "y": f"{top + plot_h - bar_h:.1f}",
                    "width": f"{bin_w - 2:.1f}",
                    "height": f"{bar_h:.1f}",
                    "class": "bar faster" if lo >= 0 else "bar slower",
                },
            )
        )
    for k in range(HIST_MIN_LOG2, HIST_MAX_LOG2 + 1):
        x = f"{x_of(k):.1f}"
        parts.append(
            _el(
                "line",
                "",
                {"x1": x, "x2": x, "y1": top + plot_h, "y2": top + plot_h + 5, "class": "axis"},
            )
        )
        parts.append(
            _el("text", _txt(_tick_label(k)), {"x": x, "y": top + plot_h + 18, "class": "xtick"})
        )
    one_x = f"{x_of(0):.1f}"
    parts.append(
        _el("line", "", {"x1": one_x, "x2": one_x, "y1": top, "y2": top + plot_h, "class": "one-x"})
    )
    parts.append(
        _el(
            "line",
            "",
            {
                "x1": left,
                "x2": left + plot_w,
                "y1": top + plot_h,
                "y2": top + plot_h,
                "class": "axis",
            },
        )
    )
    parts.append(
        _el("line", "", {"x1": left, "x2": left, "y1": top, "y2": top + plot_h, "class": "axis"})
    )
    parts.append(
        _el("text", _txt(x_label), {"x": left + plot_w / 2, "y": height - 10, "class": "xlabel"})
    )
    parts.append(
        _el(
            "text",
            "Problems",
            {
                "x": 14,
                "y": top + plot_h / 2,
                "class": "ylabel",
                "transform": f"rotate(-90 14 {top + plot_h / 2:.1f})",
            },
        )
    )
    summary = _hist_summary(values)
    parts.append(_el("text", _txt(summary), {"x": left, "y": 18, "class": "hist-title"}))
    svg = _el(
        "svg",
        "".join(parts),
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width} {height}",
            "width": width,
            "height": height,
            "role": "img",
            "aria-label": x_label,
            "class": "histogram",
        },
    )
    return _el("figure", svg)


def _hist_summary(values: list[float]) -> str:
    if not values:
        return "no correct attempts with this speed-up"
    geo = math.exp(sum(math.log(v) for v in values) / len(values))
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return f"n={len(values)}, geomean {geo:.2f}x, median {median:.2f}x"


# --------------------------------------------------------------------------- 4. problems


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


def _problem_table(ordered: list[AttemptRecord], records: list[AttemptRecord]) -> str:
    if not ordered:
        return _note("No attempts recorded in this run yet.")
    attempts: dict[str, int] = {}
    for record in records:
        attempts[record.problem_id] = attempts.get(record.problem_id, 0) + 1
    head = _el(
        "tr",
        "".join(_el("th", _txt(title), {"title": "click to sort"}) for title in PROBLEM_COLUMNS),
    )
    rows = [_problem_row(r, attempts.get(r.problem_id, 1)) for r in ordered]
    return _table([head], rows, {"class": "problems sortable", "id": "problem-table"}) + _note(
        "One row per problem: its chosen attempt (the fastest correct one; for an unsolved "
        "problem, its first attempt). Problem flags are the task lint's findings on the problem "
        "itself (degenerate: a trivial kernel could pass it); '?' means not linted."
    )


def _verdict(result: dict[str, Any]) -> tuple[str, str]:
    """(verdict text, css class) of an evaluation result."""
    if result.get("correct"):
        return "correct", "ok"
    error = result.get("error")
    if isinstance(error, dict) and error.get("stage"):
        return f"failed at {error['stage']}", "fail"
    return ("incorrect" if result.get("compiled") else "failed"), "fail"


def _cell(text: str, sort_value: Any = None, cls: str | None = "num") -> str:
    sort_key = "" if sort_value is None else sort_value
    return _el("td", _txt(text), {"data-v": sort_key, "class": cls})


def _problem_row(record: AttemptRecord, n_attempts: int) -> str:
    result = record.result if isinstance(record.result, dict) else {}
    anchor = trajectory_anchor(record.problem_id) if record.trajectory else None
    pid = _txt(record.problem_id)
    id_cell = _el("a", pid, {"href": f"#{anchor}", "class": "trajlink"}) if anchor else pid
    verdict, verdict_cls = _verdict(result)
    verdict_html = _el("span", _txt(verdict), {"class": f"verdict {verdict_cls}"})
    error = result.get("error")
    if not result.get("correct") and isinstance(error, dict) and error.get("message"):
        message, _ = _truncate(str(error["message"]), MAX_ERROR)
        verdict_html += _el("div", _txt(message), {"class": "errmsg"})
    reward = _number(result.get("reward"))
    flags = [str(f) for f in result.get("flags") or []]
    problem_flags = record.problem_flags
    numbers = [
        ("-" if reward is None else f"{reward:.2f}", reward),
        *[
            (fmt_us(_number(result.get(k))), _number(result.get(k)))
            for k in ("runtime_us", "eager_us", "compile_us")
        ],
        *[
            (fmt_x(_number(result.get(k))), _number(result.get(k)))
            for k in ("speedup_eager", "speedup_compile")
        ],
    ]
    cells = [
        _el("td", id_cell, {"data-v": record.problem_id, "class": "pid"}),
        _cell("-" if record.level is None else str(record.level), record.level),
        _cell(f"{record.source} #{record.attempt} of {n_attempts}", record.attempt, None),
        _el("td", verdict_html, {"data-v": verdict}),
        *[_cell(text, value) for text, value in numbers],
        _el(
            "td",
            "".join(_el("span", _txt(f), {"class": "flag"}) for f in flags),
            {"data-v": " ".join(flags)},
        ),
        _el(
            "td",
            "?" if problem_flags is None else _lint_flags(problem_flags),
            {"data-v": "?" if problem_flags is None else " ".join(problem_flags)},
        ),
        _el(
            "td",
            _el("a", "view", {"href": f"#{anchor}", "class": "trajlink"}) if anchor else "-",
            {"data-v": "1" if anchor else ""},
        ),
    ]
    degenerate = " degenerate" if problem_flags else ""
    return _el("tr", "".join(cells), {"class": verdict_cls + degenerate})


# --------------------------------------------------------------------------- 5. trajectories


def _trajectories(run_dir: Path, records: list[AttemptRecord]) -> str:
    if not records:
        return _note("No agent trajectories in this run.")
    buttons = _el(
        "p",
        _el("button", "Expand all", {"type": "button", "id": "expand-all"})
        + " "
        + _el("button", "Collapse all", {"type": "button", "id": "collapse-all"}),
    )
    return buttons + "".join(_trajectory_section(run_dir, r) for r in records)


def read_trajectory(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """A trajectory's events and a note on what could not be read (None when all was read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return [], f"trajectory file unreadable: {err.strerror or err}"
    events, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad += 1
    note = f"{bad} unreadable line(s) skipped" if bad else None
    if not events and note is None:
        note = "trajectory file is empty"
    return events, note


def _trajectory_section(run_dir: Path, record: AttemptRecord) -> str:
    path = run_dir / str(record.trajectory)
    events, note = read_trajectory(path)
    exit_event = next((e for e in reversed(events) if e.get("kind") == "exit"), None)
    summary_parts = [record.problem_id]
    if record.level is not None:
        summary_parts.append(f"level {record.level}")
    if exit_event is not None:
        summary_parts.append(
            f"exit: {exit_event.get('reason')} after {exit_event.get('turns')} turns"
        )
    summary_parts.append(_verdict(record.result if isinstance(record.result, dict) else {})[0])
    body = [_el("p", _txt(f"File: {record.trajectory}"), {"class": "path"})]
    if note:
        body.append(_el("p", _txt(f"Note: {note}."), {"class": "warn"}))
    body.append(_events_html(events))
    body.append(_usage_summary(events))
    return _el(
        "details",
        _el("summary", _txt(" — ".join(summary_parts))) + "".join(body),
        {"id": trajectory_anchor(record.problem_id), "class": "traj"},
    )


def _events_html(events: list[dict[str, Any]]) -> str:
    blocks: list[tuple[str, list[str]]] = [("Setup", [])]
    turn = 0
    for event in events:
        kind = event.get("kind")
        raw = event.get("message")
        message: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if kind == "message" and message.get("role") == "assistant":
            turn += 1
            blocks.append((f"Turn {event.get('turn', turn)}", []))
        html = _event_html(event, message)
        if html:
            blocks[-1][1].append(html)
    items = [
        _el("li", _el("h4", _txt(title)) + "".join(parts), {"class": "turn"})
        for title, parts in blocks
        if parts
    ]
    return _el("ol", "".join(items), {"class": "turns"}) if items else ""


def _event_html(event: dict[str, Any], message: dict[str, Any]) -> str:
    kind = event.get("kind")
    if kind == "start":
        fields = {k: event.get(k) for k in ("problem", "model", "backend") if event.get(k)}
        text = ", ".join(f"{k}: {v}" for k, v in fields.items())
        return _el("div", _txt(f"Episode started ({text})"), {"class": "ev meta"})
    if kind == "resume":
        return _el(
            "div", _txt(f"Resumed with {event.get('messages')} messages"), {"class": "ev meta"}
        )
    if kind == "message":
        return _message_html(message)
    if kind == "tool_result":
        return _tool_result_html(event, message)
    if kind == "evaluation":
        return _evaluation_html(event)
    if kind == "exit":
        detail = f" ({event['detail']})" if event.get("detail") else ""
        text = f"Exit: {event.get('reason')} after {event.get('turns')} turns{detail}"
        return _el("div", _txt(text), {"class": "ev exit"})
    if kind == "end":
        return _el(
            "div", _txt(f"End of episode, reward {event.get('reward')}"), {"class": "ev meta"}
        )
    if kind == "usage":
        return ""
    other = {k: v for k, v in event.items() if k != "t"}
    return _el("div", _txt(f"{kind}: {_compact(other)}"), {"class": "ev meta"})


def _pre(text: str, limit: int, cls: str = "out", highlight: bool = False) -> str:
    shown, cut = _truncate(text, limit)
    lines = []
    for line in shown.split("\n"):
        safe = _txt(line)
        lines.append(
            _el("span", safe, {"class": "errline"})
            if highlight and _ERROR_LINE.search(line)
            else safe
        )
    html = _el("pre", "\n".join(lines), {"class": cls})
    if cut:
        html += _el(
            "p", _txt(f"[{cut:,} of {len(text):,} characters not shown]"), {"class": "trunc"}
        )
    return html


def _message_html(message: dict[str, Any]) -> str:
    role = str(message.get("role", "?"))
    content = message.get("content")
    text = (
        content
        if isinstance(content, str)
        else ("" if content is None else _compact(content, MAX_TEXT))
    )
    if role == "system":
        return _el(
            "details",
            _el("summary", _txt(f"System prompt ({len(text):,} characters)"))
            + _pre(text, MAX_TEXT, "msg"),
            {"class": "ev system"},
        )
    parts = []
    if text.strip():
        parts.append(
            _el("div", _txt(role.capitalize()), {"class": "role"}) + _pre(text, MAX_TEXT, "msg")
        )
    for call in message.get("tool_calls") or []:
        parts.append(_tool_call_html(call))
    return _el("div", "".join(parts), {"class": f"ev {role}"}) if parts else ""


def _tool_call_html(call: Any) -> str:
    function = call.get("function", {}) if isinstance(call, dict) else {}
    name = str(function.get("name", "?"))
    raw = function.get("arguments", "")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = None
    head = _el("div", _txt("Tool call: ") + _el("code", _txt(name)), {"class": "role"})
    if not isinstance(args, dict):
        return _el("div", head + _pre(str(raw), MAX_TEXT, "args"), {"class": "call"})
    rows = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        rows.append(_el("div", _txt(key), {"class": "argname"}) + _pre(text, MAX_TEXT, "args"))
    return _el("div", head + "".join(rows), {"class": "call"})


def _tool_result_html(event: dict[str, Any], message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else _compact(content, MAX_TOOL_OUTPUT)
    bits = [f"Tool result: {event.get('name', '?')}"]
    seconds = _number(event.get("seconds"))
    if seconds is not None:
        bits.append(f"{seconds:.2f} s")
    if event.get("is_error"):
        bits.append("error")
    head = _el("div", _txt(", ".join(bits)), {"class": "role"})
    cls = "ev tool is-error" if event.get("is_error") else "ev tool"
    return _el("div", head + _pre(text, MAX_TOOL_OUTPUT, "out", highlight=True), {"class": cls})


def eval_summary(result: dict[str, Any]) -> str:
    """One line on an evaluation: verdict, reward, speed-ups, runtime (plain text)."""
    verdict, _ = _verdict(result)
    bits = [verdict]
    reward = _number(result.get("reward"))
    if reward is not None:
        bits.append(f"reward {reward:.2f}")
    for key, name in (("speedup_eager", "vs eager"), ("speedup_compile", "vs compile")):
        value = _number(result.get(key))
        if value is not None:
            bits.append(f"{fmt_x(value)} {name}")
    runtime = _number(result.get("runtime_us"))
    if runtime is not None:
        bits.append(f"{fmt_us(runtime)} µs")
    if result.get("flags"):
        bits.append("flags: " + ", ".join(str(f) for f in result["flags"]))
    return ", ".join(bits)


def _evaluation_html(event: dict[str, Any]) -> str:
    source = str(event.get("source", "evaluation"))
    result = event.get("result")
    head = f"Evaluation ({source})"
    if not isinstance(result, dict):
        code = event.get("exit_code")
        text = f"{head}: no result" + (f" (exit code {code})" if code is not None else "")
        return _el("div", _txt(text), {"class": "ev eval fail"})
    verdict_cls = "ok" if result.get("correct") else "fail"
    body = _el("div", _txt(f"{head}: {eval_summary(result)}"), {"class": "role"})
    error = result.get("error")
    if isinstance(error, dict) and error.get("message"):
        body += _pre(f"[{error.get('stage')}] {error['message']}", 3000, "out", highlight=True)
    raw = result.get("details")
    details: dict[str, Any] = raw if isinstance(raw, dict) else {}
    for key in ("verify", "timing", "profile", "kernels"):
        if key in details:
            body += _el(
                "div", _el("b", _txt(key)) + " " + _txt(_compact(details[key])), {"class": "detail"}
            )
    return _el("div", body, {"class": f"ev eval {verdict_cls}"})


def _usage_summary(events: list[dict[str, Any]]) -> str:
    usage = [e for e in events if e.get("kind") == "usage"]
    if not usage:
        return ""
    prompt = max((_number(e.get("prompt")) or 0 for e in usage), default=0)
    completion = sum(_number(e.get("completion")) or 0 for e in usage)
    text = (
        f"{len(usage)} model calls, {completion:,.0f} completion tokens, "
        f"largest prompt {prompt:,.0f} tokens"
    )
    return _el("p", _txt(text), {"class": "note"})


# --------------------------------------------------------------------------- page


CSS = """
:root { --ok: #1a7f37; --fail: #cf222e; --muted: #57606a; --line: #d0d7de; --bg2: #f6f8fa; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto;
  max-width: 1500px; padding: 16px 24px; color: #1f2328; }
h1 { font-size: 22px; margin: 4px 0 10px; } h2 { font-size: 18px; margin-top: 28px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; }
nav a { margin-right: 14px; }
dl.info { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 0; }
dl.info dt { color: var(--muted); } dl.info dd { margin: 0; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
thead th { background: var(--bg2); } td.num { text-align: right;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
th.group { text-align: center; } .group-start { border-left: 2px solid #8c959f; }
tr.this-run { background: #ddf4ff; font-weight: 600; }
table.sortable thead th { cursor: pointer; user-select: none; }
table.sortable thead th[data-dir=asc]::after { content: " ▲"; }
table.sortable thead th[data-dir=desc]::after { content: " ▼"; }
.verdict.ok { color: var(--ok); font-weight: 600; } .verdict.fail { color: var(--fail);
  font-weight: 600; }
.errmsg { font: 12px ui-monospace, monospace; white-space: pre-wrap; color: var(--fail);
  max-width: 520px; max-height: 9em; overflow: auto; }
.flag { display: inline-block; background: #fff8c5; border: 1px solid #d4a72c;
  border-radius: 8px; padding: 0 6px; margin: 1px; font-size: 12px; }
.flag.lint { background: #ffebe9; border-color: #cf222e; }
tr.degenerate td.pid::after { content: " ⚠"; color: #cf222e; }
.verdict.missing { color: var(--muted); }
.note { color: var(--muted); font-size: 12.5px; } .warn { color: var(--fail); }
.figures { display: flex; flex-wrap: wrap; gap: 18px; } figure { margin: 0; }
svg.histogram { background: #fff; border: 1px solid var(--line); }
svg .plot-bg { fill: #fbfcfd; } svg .grid { stroke: #eaeef2; } svg .axis { stroke: #57606a; }
svg .bar.faster { fill: #2f81f7; } svg .bar.slower { fill: #f0883e; }
svg .one-x { stroke: #cf222e; stroke-dasharray: 4 3; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
svg .xtick, svg .xlabel, svg .ylabel { text-anchor: middle; }
svg .ytick { text-anchor: end; dominant-baseline: middle; }
svg .xlabel, svg .ylabel { font-size: 12px; font-weight: 600; }
details.traj { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0;
  padding: 4px 10px; } details.traj > summary { cursor: pointer; font-weight: 600; }
details.traj:target { outline: 2px solid #2f81f7; }
ol.turns { padding-left: 22px; } li.turn { margin: 8px 0; } li.turn h4 { margin: 4px 0; }
.ev { margin: 4px 0; padding: 4px 8px; border-left: 3px solid var(--line); }
.ev.assistant { border-color: #8250df; } .ev.user { border-color: #57606a; }
.ev.tool { border-color: #2f81f7; background: var(--bg2); }
.ev.tool.is-error { border-color: var(--fail); }
.ev.eval.ok { border-color: var(--ok); background: #dafbe1; }
.ev.eval.fail { border-color: var(--fail); background: #ffebe9; }
.ev.exit { border-color: #1f2328; font-weight: 600; } .ev.meta { color: var(--muted); }
.role { font-weight: 600; font-size: 12.5px; } .argname { color: var(--muted); font-size: 12px; }
.call { margin: 4px 0; }
pre { font: 12px/1.35 ui-monospace, SFMono-Regular, Menlo, monospace; white-space: pre-wrap;
  word-break: break-word; margin: 2px 0; max-height: 420px; overflow: auto;
  background: #fff; border: 1px solid #eaeef2; padding: 4px 6px; }
pre .errline { color: var(--fail); font-weight: 600; } .trunc { color: var(--muted);
  font-style: italic; font-size: 12px; margin: 0; }
.detail { font: 11.5px ui-monospace, monospace; color: var(--muted); word-break: break-all; }
.path { color: var(--muted); font-size: 12px; margin: 2px 0; }
"""

JS = """
(function () {
  function key(cell) {
    var v = cell.getAttribute('data-v');
    if (v === null) { v = cell.textContent; }
    if (v === '') { return null; }
    var n = Number(v);
    return isNaN(n) ? v.toLowerCase() : n;
  }
  function compare(a, b) {
    if (a === null || b === null) { return a === b ? 0 : (a === null ? 1 : -1); }
    if (typeof a !== typeof b) { return typeof a === 'number' ? -1 : 1; }
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener('click', function () {
        var asc = th.getAttribute('data-dir') !== 'asc';
        Array.prototype.forEach.call(heads, function (h) { h.removeAttribute('data-dir'); });
        th.setAttribute('data-dir', asc ? 'asc' : 'desc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (r1, r2) {
          var a = key(r1.cells[col]), b = key(r2.cells[col]);
          if (a === null || b === null) { return compare(a, b); }
          return asc ? compare(a, b) : compare(b, a);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === 'DETAILS') { el.open = true; el.scrollIntoView(); }
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
  function setAll(open) {
    document.querySelectorAll('details.traj').forEach(function (d) { d.open = open; });
  }
  var expand = document.getElementById('expand-all');
  var collapse = document.getElementById('collapse-all');
  if (expand) { expand.addEventListener('click', function () { setAll(true); }); }
  if (collapse) { collapse.addEventListener('click', function () { setAll(false); }); }
  document.body.dataset.ready = '1';
})();
"""


def _page(title: str, body: str, kernelbench: bool = False) -> str:
    links = [("metrics", "Metrics"), ("distributions", "Distributions"), ("problems", "Problems")]
    if kernelbench:
        links.append(("kernelbench", "KernelBench"))
    links.append(("trajectories", "Trajectories"))
    nav = _el(
        "nav", "".join(_el("a", _txt(name), {"href": f"#{anchor}"}) for anchor, name in links)
    )
    head = (
        '<meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        + _el("title", _txt(title))
        + _el("style", CSS)
    )
    return (
        "<!DOCTYPE html>\n"
        + _el(
            "html",
            _el("head", head) + "\n" + _el("body", nav + body + _el("script", JS)),
            {"lang": "en"},
        )
        + "\n"
    )
