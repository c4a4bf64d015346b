"""Timing fidelity: evaluate each problem's own reference as the candidate (speed-up should be 1).

Usage:
  python benchmarks/self_speedup.py --kb PATH [--problem-file benchmarks/problems_kb20.txt]
      [--backend cuda] [--repeat 5] [--repeat-first 4] [--out results.json]

For every problem, the reference source with ``Model`` renamed ``ModelNew`` is evaluated through
our pipeline (policy ``off``, eager baseline, fresh secret seed each time). Reports, per problem,
the speed-up eager/candidate, the wall time of the evaluation and the worker's phases (input
generation vs verification vs timing); then the median and worst |1 - speed-up| and, for the
first ``--repeat-first`` problems evaluated ``--repeat`` times, the spread across repeats.
KernelBench is a public checkout given by path, read in place (never copied here).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", required=True, type=Path, help="KernelBench checkout")
    parser.add_argument(
        "--problem-file", type=Path, default=Path(__file__).with_name("problems_kb20.txt")
    )
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--repeat-first", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.problems.loader import load_problem_file
    from cuda_agent.solutions.loader import load_solution
    from cuda_agent.workspace.init import starting_model_new

    names = [
        ln.strip()
        for ln in args.problem_file.read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    tmp = Path(tempfile.mkdtemp(prefix="self-speedup-"))
    opts = EvalOptions(
        backend=args.backend, baselines=("eager",), policy="off", keep_spare_worker=True
    ).validate()
    rows: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        path = args.kb / "KernelBench" / name
        problem = load_problem_file(path, problem_id=path.stem)
        solution_path = tmp / f"{path.stem}.py"
        solution_path.write_text(starting_model_new(problem.source))
        runs = args.repeat if index < args.repeat_first else 1
        for run in range(runs):
            start = time.monotonic()
            result = evaluate(problem, load_solution(solution_path), opts)
            wall = time.monotonic() - start
            record = result.record
            rows.append(
                {
                    "problem": name,
                    "run": run,
                    "correct": result.correct,
                    "error": result.error.message[:300] if result.error else None,
                    "speedup": result.speedup_eager,
                    "runtime_us": result.runtime_us,
                    "eager_us": result.eager_us,
                    "wall_s": round(wall, 2),
                    "phases_s": record.worker_phases_s if record is not None else {},
                    "rounds": ((record.timing if record is not None else None) or {}).get("rounds"),
                    "warnings": result.warnings,
                }
            )
            print(_row_text(rows[-1]), flush=True)
            if args.out:
                args.out.write_text(json.dumps({"rows": rows}, indent=1))
    summary = summarise(rows)
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from speedup_deviation import deviations as abs_deviations  # this script's folder

    deviations = abs_deviations([r["speedup"] for r in rows if r["run"] == 0])
    spreads = {}
    for name in {r["problem"] for r in rows if r["run"] > 0}:
        values = [r["speedup"] for r in rows if r["problem"] == name and r["speedup"]]
        if len(values) > 1:
            spreads[name] = (max(values) - min(values)) / statistics.median(values)
    return {
        "problems": len({r["problem"] for r in rows}),
        "correct": sum(1 for r in rows if r["run"] == 0 and r["correct"]),
        "median_abs_dev": statistics.median(deviations) if deviations else None,
        "worst_abs_dev": max(deviations) if deviations else None,
        "repeat_spread_median": statistics.median(spreads.values()) if spreads else None,
        "repeat_spread": spreads,
        "median_wall_s": statistics.median(r["wall_s"] for r in rows),
    }


def _row_text(row: dict[str, Any]) -> str:
    phases = row["phases_s"]
    speed = f"{row['speedup']:.4f}" if row["speedup"] else "-"
    return (
        f"{row['problem']:<58} run {row['run']} correct={row['correct']!s:<5} "
        f"speedup={speed:<7} wall={row['wall_s']:>6.1f}s "
        f"inputs={phases.get('reference_and_inputs', 0):.2f}s "
        f"time={phases.get('time', 0):.2f}s {row['error'] or ''}"
    )


if __name__ == "__main__":
    main()
