"""Verdicts per device-hour of ``bench run`` folders, and where each verdict's device time went.

Usage: python benchmarks/verdict_rate.py RUN:WALL_S[:UTIL_FILE] [RUN:WALL_S[:UTIL_FILE] ...]

For each run folder: the verdicts in ``results.jsonl``, the correct ones, ``WALL_S`` (the
command's wall time as the recipe measured it, start-up included, so a run cut by its time limit
is counted too), verdicts per device-hour, the GPU's busy fraction (the mean of the NVML
utilisation samples in ``UTIL_FILE``, one percentage per line, as ``nvidia-smi
--query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500`` writes them), the fraction
of the wall the device was held alone to measure, and the seconds per verdict of each phase: the
pipeline's stages (``timings_s``: static, build, worker, memory, baseline) and the workers' own
phases (``worker_phases_s``: reference and inputs, import, verify, kernel record, time, stream
check, and the waits for the device's turns) and the memory checks' phases (``memory.*``: the
checked worker's start, reference, import, forward), summed over the jobs
(``cluster/ledger.utilization``). Then, for each pair of runs in the order given (first and
second, third and fourth...), whether they gave the same verdict on every solution both judged.
Prints a table and, last, one JSON line. Reads files; runs nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_pair import load, verdict

from cuda_agent.cluster.ledger import utilization


def busy(util_file: str) -> float | None:
    if not util_file or not Path(util_file).exists():
        return None
    samples = []
    for line in Path(util_file).read_text().splitlines():
        try:
            samples.append(float(line.strip()))
        except ValueError:
            continue
    return round(sum(samples) / len(samples) / 100, 4) if samples else None


def summary(spec: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    folder, wall_text, *rest = spec.split(":")
    wall = float(wall_text)
    found, _ = load(Path(folder))  # bench_pair reads a run folder's results.jsonl
    figures = utilization(None, ["0"], wall, found.values())
    count = max(1, len(found))
    per_verdict = {
        **{k: round(v / count, 2) for k, v in figures["phases_s"].items()},
        **{f"worker.{k}": round(v / count, 2) for k, v in figures["worker_phases_s"].items()},
        **{f"memory.{k}": round(v / count, 2) for k, v in figures["memory_check_phases_s"].items()},
    }
    return {
        "run": Path(folder).name,
        "verdicts": len(found),
        "correct": sum(r.correct for r in found.values()),
        "wall_s": wall,
        "per_hour": round(3600 * len(found) / wall) if wall else None,
        "gpu_busy": busy(rest[0] if rest else ""),
        "exclusive_fraction": figures["exclusive_fraction"],
        "memory_checks": figures["memory_checks"],
        "seconds_per_verdict": per_verdict,
    }, found


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    rows = [summary(spec) for spec in argv]
    print(
        f"{'run':<16} {'verdicts':>8} {'correct':>7} {'wall s':>7} {'per hour':>8} "
        f"{'gpu busy':>8} {'alone':>6}"
    )
    for row, _ in rows:
        gpu = "-" if row["gpu_busy"] is None else f"{row['gpu_busy']:.0%}"
        print(
            f"{row['run']:<16} {row['verdicts']:>8} {row['correct']:>7} {row['wall_s']:>7.0f} "
            f"{row['per_hour']:>8} {gpu:>8} {row['exclusive_fraction']:>6.0%}"
        )
    for row, _ in rows:
        parts = ", ".join(f"{k} {v}" for k, v in row["seconds_per_verdict"].items())
        print(f"  {row['run']}: memory checks {row['memory_checks']}")
        print(f"  {row['run']}: seconds per verdict: {parts}")
    out: dict[str, Any] = {"runs": [row for row, _ in rows]}
    comparisons = []
    for (first, a), (other, b) in zip(rows[::2], rows[1::2], strict=False):
        both = sorted(set(a) & set(b))
        differ = [i for i in both if verdict(a[i]) != verdict(b[i])]
        print(
            f"{first['run']} / {other['run']}: same verdict on {len(both) - len(differ)} of "
            f"{len(both)} judged by both"
        )
        for ident in differ:
            print(f"  {ident}: {verdict(a[ident])} / {verdict(b[ident])}")
        comparisons.append(
            {
                "runs": [first["run"], other["run"]],
                "same": len(both) - len(differ),
                "both": len(both),
                "differ": differ,
            }
        )
    if comparisons:  # the first pair, as before
        out["same_verdicts"] = comparisons[0]["same"]
        out["judged_by_both"] = comparisons[0]["both"]
        out["differ"] = comparisons[0]["differ"]
        out["comparisons"] = comparisons
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
