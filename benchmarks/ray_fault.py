"""The RayPool fault drill: kill one device actor in the middle of a bench run, check that the
job it held ran again on a fresh actor and that every problem has its result.

Usage (on the GPU machine, the Ray bundle on PYTHONPATH, references written by
``cuda-agent bench references``):
  python3 benchmarks/ray_fault.py --problems .kb --levels 1 --solutions /tmp/refs \\
      --backend cuda --limit 30 --kill-after 30 --how signal --out $OUT/fault
On the CPU: ``--backend cpu --problems bundled --solutions FOLDER``.

The bench run is ``bench run``'s own (``run_solutions``: results.jsonl in ``--out``) on a RayPool
over a local Ray with every GPU (``--workers`` to choose). ``--kill-after`` seconds after the
first job starts, a side thread waits until an actor is busy, notes the processes that actor
started, and kills it: ``--how signal`` sends SIGKILL to its process (a crash), ``--how ray``
calls ``ray.kill``. Printed at the end: problems, results, correct, the actor restarts, the jobs
caught on the dead actor and how their retry went, jobs per device, whether any process of the
dead actor outlived it, and the wall time. Exit 1 if a problem has no result, the retried job is
not correct, nothing was killed, or a process of the dead actor lives on.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def killer(
    pool: Any, started: float, after_s: float, how: str, report: dict[str, Any]
) -> threading.Thread:
    from cuda_agent.cluster.orphans import marked

    def run() -> None:
        time.sleep(after_s)
        deadline = time.monotonic() + 600
        while not pool.busy_actors() and time.monotonic() < deadline:
            time.sleep(0.05)
        busy = pool.busy_actors()
        if not busy:
            return
        index = busy[0]
        where = pool.actor_where(index)
        report["victim"] = {"index": index, **where}
        report["left_behind"] = marked(where["token"])
        report["killed_after_s"] = time.monotonic() - started
        if how == "signal":
            os.kill(where["pid"], signal.SIGKILL)
        else:
            pool.kill_actor(index)

    thread = threading.Thread(target=run, name="fault-drill", daemon=True)
    thread.start()
    return thread


def survivors(pids: list[int], wait_s: float) -> list[int]:
    """Those of ``pids`` still running (not zombies) after at most ``wait_s`` seconds."""

    def running(pid: int) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    deadline = time.monotonic() + wait_s
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [p for p in pids if running(p)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="bundled")
    parser.add_argument("--levels", default=None)
    parser.add_argument("--solutions", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--size", default=None, help="small or standard (default: by backend)")
    parser.add_argument("--limit", type=int, default=None, help="The first N problems only.")
    parser.add_argument("--workers", type=int, default=None, help="Actors (default: every GPU).")
    parser.add_argument("--kill-after", type=float, default=30.0)
    parser.add_argument("--how", choices=("signal", "ray"), default="signal")
    parser.add_argument("--policy", default="off")
    parser.add_argument("--baselines", default="eager")
    parser.add_argument("--spare-workers", type=int, default=3)
    args = parser.parse_args()
    if not args.solutions.is_dir():
        print(f"--solutions {args.solutions}: no such folder", file=sys.stderr)
        return 2
    if args.out.exists() and any(args.out.iterdir()):
        print(f"--out {args.out} is not empty: the drill needs a fresh run", file=sys.stderr)
        return 2
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    from cuda_agent.bench.run import run_solutions
    from cuda_agent.cluster.ray_pool import RayPool
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.problems.sets import load_problem_set

    size = args.size or ("small" if args.backend == "cpu" else "standard")
    levels = tuple(int(v) for v in args.levels.split(",")) if args.levels else None
    problems = load_problem_set(args.problems, levels, size)[: args.limit]
    options = EvalOptions(
        backend=args.backend,
        baselines=tuple(args.baselines.split(",")),
        policy=args.policy,
        keep_spare_worker=True,
        spare_depth=args.spare_workers,
    ).validate()
    started = time.monotonic()
    pool = RayPool(args.backend, workers=args.workers)
    pool_ready_s = time.monotonic() - started
    report: dict[str, Any] = {}
    try:
        drill = killer(pool, time.monotonic(), args.kill_after, args.how, report)
        records = run_solutions(problems, args.solutions, pool, options, args.out)
        drill.join(timeout=5)
    finally:
        pool.close()
    wall_s = time.monotonic() - started
    return summarise(problems, records, pool, report, pool_ready_s, wall_s)


def summarise(
    problems: list[Any],
    records: list[Any],
    pool: Any,
    report: dict[str, Any],
    pool_ready_s: float,
    wall_s: float,
) -> int:
    by_id = {r.problem_id: r.result for r in records}
    missing = [p.id for p in problems if p.id not in by_id]
    correct = sum(r.correct for r in by_id.values())
    devices = collections.Counter(str(r.details.pool_device) for r in by_id.values())
    retried = {pid: r for pid, r in by_id.items() if (r.details.pool_attempts or 1) > 1}
    print(f"problems {len(problems)}  results {len(by_id)}  correct {correct}  missing {missing}")
    print(f"pool ready {pool_ready_s:.1f} s, wall {wall_s:.1f} s, jobs per device {dict(devices)}")
    victim = report.get("victim")
    failures = []
    if victim is None:
        failures.append("no actor was busy to kill: raise --limit or lower --kill-after")
    else:
        print(
            f"killed actor {victim['index']} (pid {victim['pid']}, device {victim['device']}) "
            f"{report['killed_after_s']:.1f} s into the bench run; "
            f"actor restarts {pool.actor_restarts}; jobs caught on it {pool.actor_failures}"
        )
        left = survivors(report["left_behind"], 15.0)
        print(
            f"its processes: {len(report['left_behind'])} at the kill, "
            f"{len(left)} still running 15 s later"
        )
        if left:
            failures.append(f"processes of the dead actor live on: {left}")
    for pid, result in retried.items():
        print(
            f"retried {pid}: attempts {result.details.pool_attempts}, "
            f"on {result.details.pool_device}, correct {result.correct}, "
            f"speed-up {result.speedup_eager}"
        )
        if not result.correct:
            failures.append(f"the retried job {pid} is not correct")
    if victim is not None and not retried:
        failures.append("the kill caught no job (none was retried)")
    if missing:
        failures.append(f"problems without a result: {missing}")
    for line in failures:
        print(f"FAILED: {line}")
    print("fault drill ok" if not failures else "fault drill FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
