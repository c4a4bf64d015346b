"""The HTML report's "KernelBench" section: KernelBench's verdicts beside ours, per problem.

For each compared results file: the agreement counts, the disagreements by reason class, and a
sortable per-problem table (problem, their verdict, ours, our flags, problem flags, outcome,
reason, detail). Rendering only: the rows and counts come from ``bench.agreement``; every
piece of data is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence

from cuda_agent.bench.agreement import KernelBenchComparison, Row
from cuda_agent.bench.html_parts import el, note, table, txt

COLUMNS = ("Problem", "KernelBench", "Ours", "Our flags", "Problem flags", "Outcome", "Reason")
OUTCOMES = {
    "agree_correct": ("agree: correct", "ok"),
    "agree_rejected": ("agree: rejected", "ok"),
    "ours_only": ("only ours correct", "fail"),
    "theirs_only": ("only theirs correct", "fail"),
    "missing_ours": ("not in this run", "missing"),
    "missing_theirs": ("not in their results", "missing"),
}


def kernelbench_section(comparisons: Sequence[KernelBenchComparison]) -> str:
    return "".join(_one(c) for c in comparisons)


def _one(comparison: KernelBenchComparison) -> str:
    counts = comparison.counts
    outcomes = counts["outcomes"]
    summary = [
        ("Compared", f"{counts['compared']} of {counts['problems']} problems"),
        (
            "Agree",
            f"{counts['agree']} ({outcomes.get('agree_correct', 0)} correct, "
            f"{outcomes.get('agree_rejected', 0)} rejected)",
        ),
        ("Only ours correct", str(outcomes.get("ours_only", 0))),
        ("Only theirs correct", str(outcomes.get("theirs_only", 0))),
        ("Correct", f"ours {counts['ours_correct']}, theirs {counts['theirs_correct']}"),
        ("Unclassified disagreements", str(counts["unclassified"])),
        ("False build failures", str(counts["false_build_failures"])),
    ]
    info = el(
        "dl", "".join(el("dt", txt(k)) + el("dd", txt(v)) for k, v in summary), {"class": "info"}
    )
    reasons = table(
        [el("tr", el("th", "Reason class") + el("th", "Disagreements"))],
        [
            el("tr", el("td", txt(reason)) + el("td", txt(n), {"class": "num"}))
            for reason, n in counts["reasons"].items()
        ],
        {"class": "reasons"},
    )
    head = el("tr", "".join(el("th", txt(c), {"title": "click to sort"}) for c in COLUMNS))
    rows = table([head], [_row(r) for r in comparison.rows], {"class": "kb sortable"})
    return el(
        "div",
        el("h3", txt(comparison.label))
        + info
        + reasons
        + rows
        + note(
            "Reason classes come from our flags and error (when we reject) or from "
            "KernelBench's error kind (when it does); see docs/compat.md."
        ),
        {"class": "kb-compare"},
    )


def _row(row: Row) -> str:
    text, cls = OUTCOMES.get(row.outcome, (row.outcome, ""))
    reason = txt(row.reason or "")
    if row.detail:
        reason += el("div", txt(row.detail), {"class": "errmsg"})
    cells = [
        el("td", txt(row.problem_id), {"class": "pid"}),
        el("td", txt(row.theirs.label() if row.theirs else "-")),
        el("td", txt(row.our_label())),
        el("td", _flags(row.our_flags, "flag")),
        el("td", _flags(row.problem_flags or [], "flag lint")),
        el("td", el("span", txt(text), {"class": f"verdict {cls}"}), {"data-v": text}),
        el("td", reason, {"data-v": row.reason or ""}),
    ]
    return el("tr", "".join(cells), {"class": cls})


def _flags(flags: list[str], cls: str) -> str:
    return "".join(el("span", txt(f), {"class": cls}) for f in flags)
