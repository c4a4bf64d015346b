"""Summarise the reference-as-solution sweep in gpu-runs/ (made by benchmarks/sweep.sh).

Usage: python benchmarks/sweep_summary.py gpu-runs

Per run (mode and level): problems done, correct, wall seconds (the sum of the segments in
times.jsonl), throughput, the spread of self-speed-ups (|1 - speed-up|) and the jobs per GPU;
then where each run's worker time went (phases summed over problems, and how many timings
stopped at the time cap); then the one-GPU against two-GPU wall-time ratio over the levels
both finished, and RayPool ("ray2", recipes/two_gpus.sh ray) against LocalPool on two GPUs
("local2" of an earlier run, or "two"); then, when gpu-runs/kb_self.json exists, KernelBench's
evaluator beside ours on the same problems.
"""

from __future__ import annotations

import collections
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from cuda_agent.bench.records import AttemptRecord, read_records


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    dev = sorted(abs(1 - v) for v in values)
    return (
        f"median {100 * statistics.median(dev):.2f}% "
        f"p90 {100 * dev[int(0.9 * (len(dev) - 1))]:.2f}% max {100 * dev[-1]:.2f}%"
    )


def phases(rows: list[AttemptRecord]) -> str:
    """Worker seconds per phase, summed over ``rows``, and the count of time-capped timings."""
    total: dict[str, float] = collections.defaultdict(float)
    capped = 0
    for r in rows:
        record = r.result.record
        for name, seconds in (record.worker_phases_s if record is not None else {}).items():
            total[name] += float(seconds)
        timing = (record.timing if record is not None else None) or {}
        capped += timing.get("stop_reason") == "time_cap"
    spent = ", ".join(f"{name} {seconds:.0f}" for name, seconds in total.items())
    return f"worker s: {spent or '-'}; timings at the time cap: {capped}"


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "gpu-runs")
    times = read_jsonl(root / "times.jsonl")
    wall: dict[tuple[str, int], float] = collections.defaultdict(float)
    for seg in times:
        wall[(seg["mode"], int(seg["level"]))] += float(seg["end"]) - float(seg["start"])
    ours: dict[str, float] = {}
    finished: dict[tuple[str, int], bool] = {}
    print(f"{'run':<8} {'done':>5} {'ok':>5} {'wall s':>8} {'per min':>8}  self-speed-up spread")
    for run in sorted(root.glob("*/L*")):
        mode, level = run.parent.name, int(run.name[1:])
        rows = read_records(run)
        ok = [r for r in rows if r.correct]
        speedups = [s for r in ok if (s := r.result.speedup_eager)]
        if mode == "one":
            ours.update({r.problem_id: s for r in ok if (s := r.result.speedup_eager)})
        devices = collections.Counter(str(r.result.details.pool_device) for r in rows)
        seconds = wall.get((mode, level), 0.0)
        finished[(mode, level)] = (run / ".done").exists()
        rate = 60 * len(rows) / seconds if seconds else 0.0
        print(
            f"{mode}/L{level:<4} {len(rows):>5} {len(ok):>5} {seconds:>8.1f} {rate:>8.1f}  "
            f"{spread(speedups)}  gpus {dict(devices)}{'' if finished[(mode, level)] else ' (cut)'}"
        )
        retried = [r.problem_id for r in rows if (r.result.details.pool_attempts or 1) > 1]
        print(f"    {phases(rows)}" + (f"; retried by the pool: {retried}" if retried else ""))
        for r in rows:
            if not r.correct:
                error = (r.result.error.message if r.result.error is not None else "")[:160]
                print(f"    not correct: {r.problem_id}: {error}")
    both = [lv for lv in (1, 2, 3) if finished.get(("one", lv)) and finished.get(("two", lv))]
    if both:
        one = sum(wall[("one", lv)] for lv in both)
        two = sum(wall[("two", lv)] for lv in both)
        print(f"levels {both}: one GPU {one:.1f} s, two GPUs {two:.1f} s, ratio {two / one:.3f}")
    for local in ("local2", "two"):
        levels = [
            lv for lv in (1, 2, 3) if finished.get((local, lv)) and finished.get(("ray2", lv))
        ]
        if levels:
            base = sum(wall[(local, lv)] for lv in levels)
            ray = sum(wall[("ray2", lv)] for lv in levels)
            print(
                f"levels {levels}: LocalPool ({local}) {base:.1f} s, RayPool (ray2) {ray:.1f} s, "
                f"ratio {ray / base:.3f}"
            )
    peer = root / "kb_self.json"
    if peer.exists():
        print("\nKernelBench's evaluator beside ours (self-speed-ups; ours from the one-GPU sweep)")
        for rec in json.loads(peer.read_text()).get("results", []):
            name = str(rec.get("problem", ""))
            level, _, stem = name.partition("/")
            pid = f"L{level.removeprefix('level')}_{Path(stem).stem}"
            theirs = rec.get("speedup")
            mine = ours.get(pid)
            wall_s = rec.get("candidate_wall_s")
            print(
                f"  {pid:<55} KernelBench {theirs if theirs is None else f'{theirs:.4f}'}"
                f"  ours {mine if mine is None else f'{mine:.4f}'}  KB wall {wall_s}"
            )


if __name__ == "__main__":
    main()
