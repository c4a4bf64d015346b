"""A fresh worker's start-up, forked from a template and started the ordinary way.

Usage: python benchmarks/worker_start.py [--backend cuda] [--runs 5] [--isolation confine]

For each way, ``--runs`` workers are started one after the other under the worker sandbox
(``--isolation``: the mode to force; ``confine`` is the GPU pod's) and timed from the start
request to the worker's "ready" line (its warm start finished: torch imported, and on cuda
its context created). The template's own start, paid once per environment, is reported apart.
Prints one table: way, the template's start, then min / median / max of the workers' starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def start_once(backend: str, env: dict[str, str], folder: Path) -> float:
    from cuda_agent.evaluator.launch.worker_spawn import discard, poll_ready, spawn_worker

    started = time.monotonic()
    handle = spawn_worker(backend, env, folder, sandboxed=True)
    while not handle.ready:
        if handle.proc.poll() is not None:
            raise RuntimeError(f"the worker died: {(folder / 'worker.stderr').read_text()[-500:]}")
        poll_ready(handle, 1.0)
    seconds = time.monotonic() - started
    discard(handle)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--isolation", default="confine")
    args = parser.parse_args()
    os.environ["CUDA_AGENT_ISOLATION"] = args.isolation
    os.environ.setdefault("CUDA_AGENT_CACHE", tempfile.mkdtemp(prefix="ca-start-cache-"))

    from cuda_agent.evaluator.launch.worker_spawn import TEMPLATE_ENV, worker_env

    root = Path(tempfile.mkdtemp(prefix="ca-start-"))
    root.chmod(0o755)  # the sandbox user (when running as root) must reach its worker folder
    rows = []
    for way, flag in (("template", "1"), ("own process", "0")):
        os.environ[TEMPLATE_ENV] = flag
        env = worker_env()
        first = start_once(args.backend, env, root / f"{flag}-warm")  # the template starts here
        times = [start_once(args.backend, env, root / f"{flag}-{k}") for k in range(args.runs)]
        rows.append((way, first, times))
    print(f"{'way':<12} {'first s':>8} {'min s':>7} {'median s':>9} {'max s':>7}  (n={args.runs})")
    for way, first, times in rows:
        print(
            f"{way:<12} {first:>8.3f} {min(times):>7.3f} {statistics.median(times):>9.3f} "
            f"{max(times):>7.3f}"
        )


if __name__ == "__main__":
    main()
