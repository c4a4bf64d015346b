"""Whole-evaluation latency of a trivial elementwise candidate (build, 5 trials, timing).

Usage: python benchmarks/eval_latency.py [--backend cuda] [--runs 3] [--size standard]

Run 1 is cold: a fresh cache (the precompiled header, the objects and the module are built)
and a fresh worker. Run 2 is the first candidate after the toolchain is warm: a new source
(its kernel file edited), the header and the harness's binding object cached. Later runs
repeat an unchanged candidate: the build is cached and a spare worker (torch imported, CUDA
context created) has finished its warm start, as in a pool or an RL loop at steady state.
Baseline: eager, timed interleaved.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--size", default="standard")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="ca-latency-cache-"))
    os.environ["CUDA_AGENT_CACHE"] = str(cache)

    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate, spare_workers
    from cuda_agent.examples import examples_root
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.solutions.loader import load_solution

    problem = resolve_problem("bias_gelu_scale", args.size)
    source = examples_root() / "bias_gelu_scale" / args.backend
    work = Path(tempfile.mkdtemp(prefix="ca-latency-")) / "workdir"
    shutil.copytree(source, work)
    kernel = next(p for p in (work / "kernels").iterdir() if "_binding" not in p.name)
    opts = EvalOptions(
        backend=args.backend, baselines=("eager",), keep_spare_worker=True
    ).validate()
    print(f"{'run':<42} {'wall s':>7} {'build s':>8} {'worker s':>9} {'correct':>8}")
    for run in range(args.runs + 1):
        if run == 1:
            kernel.write_text(kernel.read_text() + f"\n// edited {secrets.token_hex(4)}\n")
        label = (
            [
                "cold (fresh cache, fresh worker)",
                "new source, warm toolchain",
            ][run]
            if run < 2
            else f"unchanged, cached build + spare worker ({run - 1})"
        )
        if run >= 2:
            spare_workers().wait_ready()  # steady state of a pool: the next worker is warm
        start = time.monotonic()
        result = evaluate(problem, load_solution(work), opts)
        wall = time.monotonic() - start
        stages = result.details.timings_s or {}
        print(
            f"{label:<42} {wall:>7.2f} {stages.get('build', 0):>8.2f} "
            f"{stages.get('worker', 0):>9.2f} {result.correct!s:>8}",
            flush=True,
        )
        if run == args.runs:
            record = result.record
            print("worker phases (last run):", record.worker_phases_s if record else None)
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
