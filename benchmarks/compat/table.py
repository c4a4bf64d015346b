"""``table``: our verdicts and KernelBench's, joined per set, as Markdown for docs/compat.md.

For each prepared set (``SET/ours`` from ``ours``, ``SET/kernelbench.jsonl`` from
``kernelbench``), ``cuda_agent.bench.agreement`` joins the two problem by problem and names
the reason class of each disagreement. The Markdown has three tables: agreement counts per set,
disagreements by reason class (one column per set), and every disagreement (set, problem,
their verdict, ours, our flags, the problem's lint flags, reason class, detail); then the
solutions both sides call correct on degenerate problems (flagged by the task lint). A set
with nothing to join yet is listed with zero counts. Reading and formatting only.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.compat.corpus import read_manifest
from benchmarks.compat.kb_runner import RESULTS
from benchmarks.compat.ours import RUN

from cuda_agent.bench.agreement import KernelBenchComparison, Row, kernelbench_comparison
from cuda_agent.bench.records import read_records

MAX_CELL = 160
COUNT_COLUMNS = (
    ("solutions", "solutions"),
    ("compared", "compared"),
    ("agree", "agree"),
    ("agree_correct", "both correct"),
    ("agree_rejected", "both rejected"),
    ("ours_only", "only ours correct"),
    ("theirs_only", "only theirs correct"),
    ("ours_correct", "ours correct"),
    ("theirs_correct", "theirs correct"),
    ("unclassified", "unclassified"),
    ("false_build_failures", "false build failures"),
)


def compare_set(set_dir: Path, run: str = RUN) -> KernelBenchComparison | None:
    records = read_records(set_dir / run)
    if not records or not (set_dir / RESULTS).is_file():
        return None
    return kernelbench_comparison(set_dir / RESULTS, records)


def markdown(set_dirs: list[Path], run: str = RUN) -> str:
    sets = [(d.name, len(read_manifest(d)["solutions"]), compare_set(d, run)) for d in set_dirs]
    parts = ["### Agreement per set", "", _counts_table(sets), ""]
    parts += ["### Disagreements by reason class", "", _reasons_table(sets), ""]
    parts += ["### Every disagreement", "", _rows_table(sets), ""]
    parts += ["### Correct on both sides, on degenerate problems", "", _degenerate(sets), ""]
    return "\n".join(parts)


def _counts_table(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    lines = [_line(["set", *(title for _, title in COUNT_COLUMNS)])]
    lines.append(_line(["---"] * (len(COUNT_COLUMNS) + 1)))
    for name, solutions, comparison in sets:
        counts: dict[str, Any] = comparison.counts if comparison else {}
        outcomes = counts.get("outcomes", {})
        values = {**counts, **outcomes, "solutions": solutions}
        lines.append(_line([name, *(str(values.get(key, 0)) for key, _ in COUNT_COLUMNS)]))
    return "\n".join(lines)


def _reasons_table(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    per_set = {name: Counter(c.counts["reasons"]) if c else Counter() for name, _, c in sets}
    total: Counter[str] = sum(per_set.values(), Counter())
    if not total:
        return "(no disagreements)"
    names = [name for name, _, _ in sets]
    lines = [_line(["reason class", *names, "total"]), _line(["---"] * (len(names) + 2))]
    for reason, n in total.most_common():
        lines.append(_line([reason, *(str(per_set[s][reason]) for s in names), str(n)]))
    return "\n".join(lines)


def _rows_table(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    head = ["set", "problem", "KernelBench", "ours", "our flags", "problem flags", "reason"]
    lines = [_line([*head, "detail"]), _line(["---"] * (len(head) + 1))]
    for name, _, comparison in sets:
        for row in comparison.rows if comparison else []:
            if row.disagrees or row.reason:
                lines.append(_line([name, *_cells(row)]))
    return "\n".join(lines) if len(lines) > 2 else "(no disagreements)"


def _cells(row: Row) -> list[str]:
    return [
        row.problem_id,
        row.theirs.label() if row.theirs else "-",
        row.our_label(),
        ", ".join(row.our_flags) or "-",
        ", ".join(row.problem_flags or []) or "-",
        row.reason or "-",
        row.detail or "-",
    ]


def _degenerate(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    lines = []
    for name, _, comparison in sets:
        for row in comparison.rows if comparison else []:
            if row.outcome == "agree_correct" and row.problem_flags:
                lines.append(f"- {name} {row.problem_id}: {', '.join(row.problem_flags)}")
    return "\n".join(lines) if lines else "(none)"


def _line(cells: list[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _cell(text: str) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"
