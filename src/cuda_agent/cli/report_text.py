"""``bench report`` as text: the problem-lint summary and KernelBench's verdicts beside ours.

Rendering only (rich tables on stdout); the numbers come from ``bench.metrics`` and
``bench.agreement``. The metrics table itself stays in ``bench_cmd.py``. Lines are printed
whole (no wrapping), so they can be grepped from a log.
"""

from __future__ import annotations

from typing import Any

from cuda_agent.bench.agreement import KernelBenchComparison
from cuda_agent.cli.common import out_console

OUTCOME_TEXT = {
    "agree_correct": "agree: correct",
    "agree_rejected": "agree: rejected",
    "ours_only": "only ours correct",
    "theirs_only": "only theirs correct",
    "missing_ours": "not in this run",
    "missing_theirs": "not in their results",
}


def print_lint_summary(metrics: dict[str, Any]) -> None:
    """One line of counts, then each flagged (degenerate) problem with its lint flags."""
    lint = metrics.get("problem_lint") or {}
    out_console.print(
        f"problem lint: {lint.get('flagged', 0)} flagged, {lint.get('clean', 0)} clean, "
        f"{lint.get('unknown', 0)} not linted (counted as unflagged)"
    )
    for pid, flags in (lint.get("flagged_problems") or {}).items():
        out_console.print(f"  degenerate: {pid}: {', '.join(flags)}", markup=False, soft_wrap=True)


def print_kernelbench(comparison: KernelBenchComparison) -> None:
    """One plain line per problem (greppable, never cut), then the counts and reasons."""
    out_console.print(
        f"{comparison.label} beside this run (theirs | ours | outcome: reason)", soft_wrap=True
    )
    for row in comparison.rows:
        flags = f" [{', '.join(row.our_flags)}]" if row.our_flags else ""
        lint = f" (degenerate: {', '.join(row.problem_flags)})" if row.problem_flags else ""
        reason = f": {row.reason}" if row.reason else ""
        out_console.print(
            f"  {row.problem_id}{lint}  {row.theirs.label() if row.theirs else '-'} | "
            f"{row.our_label()}{flags} | {OUTCOME_TEXT.get(row.outcome, row.outcome)}{reason}",
            soft_wrap=True,
            markup=False,
        )
    out_console.print(agreement_line(comparison.counts), soft_wrap=True)
    for reason, n in comparison.counts["reasons"].items():
        out_console.print(f"  {n:4d}  {reason}", markup=False)


def agreement_line(counts: dict[str, Any]) -> str:
    outcomes = counts["outcomes"]
    return (
        f"compared {counts['compared']} of {counts['problems']} problems: agree "
        f"{counts['agree']} ({outcomes.get('agree_correct', 0)} correct, "
        f"{outcomes.get('agree_rejected', 0)} rejected), disagree {counts['disagree']} (only "
        f"ours correct {outcomes.get('ours_only', 0)}, only theirs correct "
        f"{outcomes.get('theirs_only', 0)}); unclassified {counts['unclassified']}, false build "
        f"failures {counts['false_build_failures']}"
    )
