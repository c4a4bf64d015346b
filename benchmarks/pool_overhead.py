"""What RayPool costs beside LocalPool on one host: start-up, per-job overhead, module transfer.

Usage: python benchmarks/pool_overhead.py [--backend cpu] [--jobs 12] [--problem relu]
           [--size small] [--solution PATH] [--cpus N] [--json OUT]

One evaluation, repeated: the bundled problem ``--problem`` with an example solution (by default
``examples/relu/<backend>.py``, built once in another process before anything is timed, so every
job finds its build cached and this process is as cold as a fresh command: what is left is the
pool). Short timing (a few rounds), eager baseline, a spare worker kept per device, one device
in each pool (a CPU slot, or GPU 0 / one actor's GPU). For each pool (LocalPool, then RayPool on
a local Ray started here): the pool's start (RayPool: ``ray.init`` and the actors ready), the
first job (the device process starts its first worker), ``--jobs`` jobs one after another
(latency) and ``--jobs`` jobs at once (throughput); the overhead is a job's wall time less the
time its evaluation worker reports (``worker_phases_s``). Then RayPool's parts on their own: a
round trip to an actor that does nothing, the build step as a Ray task against in-process, and
the built modules a job carries to its actor (bytes, and the time to ship them there and back).

It measures; it changes nothing. Figures go to docs/benchmarking.md (Ray section).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any


def options(backend: str) -> Any:
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.worker.protocol import TimingOptions

    timing = TimingOptions(
        warmup_ms=2.0,
        warmup_calls=2,
        min_rounds=3,
        max_rounds=20,
        max_seconds=0.3,
        input_sets=2,
        check_fraction=0.5,
    )
    return EvalOptions(
        backend=backend, baselines=("eager",), timing=timing, keep_spare_worker=True
    ).validate()


def worker_seconds(result: Any) -> float:
    return float(sum(result.record.worker_phases_s.values())) if result.record else 0.0


def run_pool(pool: Any, job: Any, jobs: int) -> dict[str, Any]:
    """First job, then ``jobs`` one at a time, then ``jobs`` at once."""
    out: dict[str, Any] = {}
    started = time.monotonic()
    first = pool.submit(job).result()
    assert first.correct, first.error
    out["first_job_s"] = time.monotonic() - started
    walls, overheads = [], []
    for _ in range(jobs):
        started = time.monotonic()
        result = pool.submit(job).result()
        assert result.correct, result.error
        walls.append(time.monotonic() - started)
        overheads.append(walls[-1] - worker_seconds(result))
    out["job_wall_s_median"] = statistics.median(walls)
    out["job_overhead_s_median"] = statistics.median(overheads)
    started = time.monotonic()
    futures: list[Future[Any]] = [pool.submit(job) for _ in range(jobs)]
    results = [f.result() for f in futures]
    assert all(r.correct for r in results)
    out["burst_s_per_job"] = (time.monotonic() - started) / jobs
    return out


def ray_parts(job: Any, repeat: int) -> dict[str, Any]:
    """RayPool's pieces, timed one by one on the running local Ray."""
    import ray

    from cuda_agent.cluster.artifacts import pack
    from cuda_agent.cluster.ray_pool import DeviceActorImpl, prepare_job
    from cuda_agent.evaluator.pipeline import prepare

    def median_of(call: Any) -> float:
        times = []
        for _ in range(repeat):
            started = time.monotonic()
            call()
            times.append(time.monotonic() - started)
        return statistics.median(times)

    actor = ray.remote(num_cpus=0)(DeviceActorImpl).remote(job.options.backend)
    ray.get(actor.ready.remote())
    remote_prepare = ray.remote(num_cpus=1)(prepare_job)
    ray.get(remote_prepare.remote(job))  # a task worker with the code imported
    prepared = prepare(job.problem, job.solution, job.options)
    files = pack(prepared)
    echo = ray.remote(num_cpus=0)(lambda data: len(data))
    out = {
        "actor_round_trip_s": median_of(lambda: ray.get(actor.ready.remote())),
        "prepare_in_process_s": median_of(lambda: prepare(job.problem, job.solution, job.options)),
        "prepare_as_ray_task_s": median_of(lambda: ray.get(remote_prepare.remote(job))),
        "module_bytes_per_job": sum(len(v) for v in files.values()),
        "pack_s": median_of(lambda: pack(prepared)),
        "ship_modules_to_a_task_s": median_of(lambda: ray.get(echo.remote(files))),
    }
    ray.kill(actor)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--jobs", type=int, default=12)
    parser.add_argument("--problem", default="relu")
    parser.add_argument("--size", default="small")
    parser.add_argument("--solution", type=Path, default=None)
    parser.add_argument("--cpus", type=int, default=None, help="CPUs of the local Ray")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--prebuild-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

    from cuda_agent.cluster.local import LocalPool
    from cuda_agent.cluster.pool import EvalJob
    from cuda_agent.examples import examples_root
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.solutions.loader import load_solution

    if args.prebuild_only:
        from cuda_agent.evaluator.pipeline import prepare

        job = EvalJob(
            resolve_problem(args.problem, args.size),
            load_solution(args.solution),
            options(args.backend),
        )
        built = prepare(job.problem, job.solution, job.options)
        if built.error is not None:
            print(f"the solution does not build: {built.error.message}", file=sys.stderr)
            return 2
        return 0

    solution_path = args.solution or examples_root() / args.problem / f"{args.backend}.py"
    job = EvalJob(
        resolve_problem(args.problem, args.size),
        load_solution(solution_path),
        options(args.backend),
    )
    # the build, before any timing, in another process: this one stays as cold as a fresh
    # command (its first build step imports torch, as a Ray task worker's does)
    prebuild = [sys.executable, __file__, "--prebuild-only", "--backend", args.backend]
    prebuild += ["--problem", args.problem, "--size", args.size, "--solution", str(solution_path)]
    if subprocess.run(prebuild).returncode != 0:
        return 2

    rows: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    local = LocalPool(
        args.backend, devices=["0"] if args.backend == "cuda" else None
    )  # one, as Ray
    rows["LocalPool"] = {"start_s": time.monotonic() - started}
    try:
        rows["LocalPool"].update(run_pool(local, job, args.jobs))
    finally:
        local.close()
    print("LocalPool " + json.dumps(rows["LocalPool"]), flush=True)

    import ray

    from cuda_agent.cluster.ray_pool import RayPool

    started = time.monotonic()
    ray.init(include_dashboard=False, log_to_driver=False, num_cpus=args.cpus)
    ray_init_s = time.monotonic() - started
    remote = RayPool(args.backend, workers=1)
    rows["RayPool"] = {"start_s": time.monotonic() - started, "ray_init_s": ray_init_s}
    try:
        rows["RayPool"].update(run_pool(remote, job, args.jobs))
        parts = ray_parts(job, args.jobs)
    finally:
        remote.close()
        ray.shutdown()

    keys = ["start_s", "first_job_s", "job_wall_s_median", "job_overhead_s_median"]
    keys.append("burst_s_per_job")
    print(f"{'':<24}{'LocalPool':>12}{'RayPool':>12}")
    for key in keys:
        print(f"{key:<24}{rows['LocalPool'][key]:>12.3f}{rows['RayPool'][key]:>12.3f}")
    print(f"{'ray_init_s':<24}{'':>12}{ray_init_s:>12.3f}")
    print("RayPool's parts:")
    for key, value in parts.items():
        print(
            f"  {key:<28}{value:>12.4f}" if isinstance(value, float) else f"  {key:<28}{value:>12}"
        )
    if args.json:
        args.json.write_text(json.dumps({"pools": rows, "ray_parts": parts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
