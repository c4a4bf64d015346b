"""The HTML report's "KernelBench" section as plain data: KernelBench's verdicts beside ours.

For each compared results file: the agreement counts, the disagreements by reason class, and
the per-problem rows (problem, their verdict, ours, our flags, problem flags, outcome, reason,
detail). Data only: the rows and counts come from ``bench.agreement``; the HTML is
``templates/_kernelbench.html.j2`` (which escapes every piece of data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuda_agent.bench.agreement import KernelBenchComparison, Row

COLUMNS = ("Problem", "KernelBench", "Ours", "Our flags", "Problem flags", "Outcome", "Reason")
OUTCOMES = {  # outcome: (text, status)
    "agree_correct": ("agree: correct", "ok"),
    "agree_rejected": ("agree: rejected", "ok"),
    "ours_only": ("only ours correct", "fail"),
    "theirs_only": ("only theirs correct", "fail"),
    "missing_ours": ("not in this run", "missing"),
    "missing_theirs": ("not in their results", "missing"),
}


@dataclass(frozen=True)
class KbRow:
    problem_id: str
    theirs: str
    ours: str
    our_flags: list[str]
    problem_flags: list[str]
    outcome: str  # as shown, e.g. "only ours correct"
    status: str  # ok / fail / missing ("" for an outcome not known here)
    reason: str
    detail: str


@dataclass(frozen=True)
class KbComparisonView:
    label: str
    summary: list[tuple[str, str]]
    reasons: list[tuple[str, int]]  # reason class, disagreements
    rows: list[KbRow]


def kernelbench_views(comparisons: Sequence[KernelBenchComparison]) -> list[KbComparisonView]:
    return [comparison_view(c) for c in comparisons]


def comparison_view(comparison: KernelBenchComparison) -> KbComparisonView:
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
    reasons = [(str(reason), int(n)) for reason, n in counts["reasons"].items()]
    return KbComparisonView(
        comparison.label, summary, reasons, [row_view(r) for r in comparison.rows]
    )


def row_view(row: Row) -> KbRow:
    text, status = OUTCOMES.get(row.outcome, (row.outcome, ""))
    return KbRow(
        problem_id=row.problem_id,
        theirs=row.theirs.label() if row.theirs else "-",
        ours=row.our_label(),
        our_flags=[str(f) for f in row.our_flags],
        problem_flags=[str(f) for f in row.problem_flags or []],
        outcome=text,
        status=status,
        reason=row.reason or "",
        detail=row.detail,
    )
