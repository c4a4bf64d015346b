"""Two ``bench run`` folders of the same solutions side by side: throughput, GPU use, verdicts.

Usage: python benchmarks/bench_pair.py RUN_A RUN_B

For each run: verdicts, correct, wall seconds (``run.json``'s utilization), verdicts per
hour, the devices' held and work fractions and the mean queue wait; then whether the two
gave the same verdict (correct or not, and the failing stage) for every solution both
judged, listing those that differ. Reads files; runs nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from cuda_agent.bench.records import read_records
from cuda_agent.core.types import EvalResult


def load(folder: Path) -> tuple[dict[str, EvalResult], dict[str, Any]]:
    """The run's verdicts by problem (the last of each) and ``run.json``'s utilization."""
    results = {r.problem_id: r.result for r in read_records(folder)}
    run = folder / "run.json"
    utilization = (json.loads(run.read_text()) if run.exists() else {}).get("utilization") or {}
    return results, utilization


def verdict(result: EvalResult) -> str:
    if result.correct:
        return "correct"
    return f"rejected:{result.error.stage if result.error is not None else '?'}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main(argv: list[str]) -> int:
    runs = [(Path(a).name, *load(Path(a))) for a in argv[:2]]
    print(
        f"{'run':<14} {'verdicts':>8} {'correct':>7} {'wall s':>8} {'per hour':>8} "
        f"{'held':>6} {'work':>6} {'wait s':>7}"
    )
    for name, results, use in runs:
        wall = use.get("wall_s")
        correct = sum(r.correct for r in results.values())
        rate = f"{3600 * len(results) / wall:.0f}" if wall else "-"
        held = pct(use.get("device_held_fraction"))
        work = pct(use.get("device_work_fraction"))
        wait = (use.get("queue_wait_s") or {}).get("mean")
        waited = "-" if wait is None else f"{wait:.1f}"
        print(
            f"{name:<14} {len(results):>8} {correct:>7} {wall or '-':>8} {rate:>8} "
            f"{held:>6} {work:>6} {waited:>7}"
        )
    (name_a, a, _), (name_b, b, _) = runs
    both = sorted(set(a) & set(b))
    differ = [i for i in both if verdict(a[i]) != verdict(b[i])]
    print(f"same verdict on {len(both) - len(differ)} of {len(both)} judged by both")
    for ident in differ:
        print(f"  {ident}: {name_a} {verdict(a[ident])}, {name_b} {verdict(b[ident])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
