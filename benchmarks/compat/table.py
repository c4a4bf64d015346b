"""``table``: our verdicts and KernelBench's, joined per set, as Markdown for docs/compat.md.

For each prepared set (``SET/ours`` from ``ours``, ``SET/kernelbench.jsonl`` from
``kernelbench``), ``cuda_agent.bench.agreement`` joins the two problem by problem and names
the reason class of each disagreement. The Markdown has three tables: agreement counts per set,
disagreements by reason class (one column per set), and every disagreement (set, problem,
their verdict, ours, our flags, the problem's lint flags, reason class, detail); then the
solutions both sides call correct on degenerate problems (flagged by the task lint). A set
with nothing to join yet is listed with zero counts. Reading and formatting only.

When KernelBench's rows carry verdicts at more tolerances than the primary one (``correct_at``),
each table gives them too: a counts row ``SET at T`` per other tolerance T, a reason column
``SET at T`` beside the primary ones (the ``total`` column adds up the primary ones only), and
the disagreements that exist only at T (reason ``tolerance (KernelBench today: 1e-4)``, their
verdict ``rejected at T``) listed after the primary ones.
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
        views: list[tuple[str, dict[str, Any]]] = [(name, comparison.counts if comparison else {})]
        views += [(f"{name} at {a.key}", a.counts) for a in (comparison.at if comparison else [])]
        for label, counts in views:
            outcomes = counts.get("outcomes", {})
            values = {**counts, **outcomes, "solutions": solutions}
            lines.append(_line([label, *(str(values.get(key, 0)) for key, _ in COUNT_COLUMNS)]))
    primaries = [f"{name} {c.tolerance}" for name, _, c in sets if c and c.tolerance and c.at]
    if primaries:  # say which tolerance the plain set rows are at
        lines.append("")
        lines.append(
            f"KernelBench's primary tolerance (the rows without `at`): {', '.join(primaries)}"
        )
    return "\n".join(lines)


def _reasons_table(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    per_set = {name: Counter(c.counts["reasons"]) if c else Counter() for name, _, c in sets}
    total: Counter[str] = sum(per_set.values(), Counter())
    at = {
        f"{name} at {a.key}": Counter(a.counts["reasons"])
        for name, _, c in sets
        for a in (c.at if c else [])
    }
    everything: Counter[str] = sum(at.values(), Counter(total))
    if not everything:
        return "(no disagreements)"
    names = [name for name, _, _ in sets]
    head = ["reason class", *names, "total", *at]
    lines = [_line(head), _line(["---"] * len(head))]
    for reason, _ in sorted(everything.items(), key=lambda kv: (-total[kv[0]], -kv[1])):
        cells = [str(per_set[s][reason]) for s in names]
        lines.append(
            _line([reason, *cells, str(total[reason]), *(str(c[reason]) for c in at.values())])
        )
    return "\n".join(lines)


def _rows_table(sets: list[tuple[str, int, KernelBenchComparison | None]]) -> str:
    head = ["set", "problem", "KernelBench", "ours", "our flags", "problem flags", "reason"]
    lines = [_line([*head, "detail"]), _line(["---"] * (len(head) + 1))]
    for name, _, comparison in sets:
        for row in comparison.rows if comparison else []:
            if row.disagrees or row.reason:
                lines.append(_line([name, *_cells(row)]))
    for name, _, comparison in sets:  # what disagrees only at another tolerance
        primary = {r.problem_id: r.outcome for r in comparison.rows} if comparison else {}
        for view in comparison.at if comparison else []:
            for row in view.rows:
                if row.disagrees and primary.get(row.problem_id) != row.outcome:
                    lines.append(_line([name, *_cells(row, view.key)]))
    return "\n".join(lines) if len(lines) > 2 else "(no disagreements)"


def _cells(row: Row, at: str | None = None) -> list[str]:
    theirs = row.theirs.label() if row.theirs else "-"
    if at is not None and row.theirs is not None:
        verdict = row.theirs.correct_at_key(at)
        theirs = f"{'correct' if verdict else 'rejected'} at {at}"
    return [
        row.problem_id,
        theirs,
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
