"""Wall time of one `cuda-agent eval` from the shell: alone, and with `cuda-agent serve` running.

Usage: python benchmarks/eval_cli_latency.py [--backend cuda] [--runs 3] [--problem relu]

The candidate has nothing to build (the problem's own reference renamed ModelNew, policy off),
as in the measurement that motivated the service (15.8 s on an H200). A first call warms the
caches (the torch.compile baseline); then each mode runs ``--runs`` times. Alone, every call
starts Python, imports the command, starts a worker (torch, CUDA context, dynamo) and
evaluates. With the service, the call connects to a process that keeps a started worker ready:
"worker ready" waits before each call until the service reports its spare warmed up (as after
an agent's turn, which takes longer than a worker's start); "back to back" leaves one second
between calls, so a call may take a spare still warming up (its ``start s`` says how long).
Prints the wall times, the worker's measured phases and where the rest went.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--problem", default="relu")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="ca-cli-latency-"))
    cache.chmod(0o755)
    env = {**os.environ, "CUDA_AGENT_CACHE": str(cache)}
    folder = cache / "refs"
    cli = [sys.executable, "-m", "cuda_agent"]
    subprocess.run(
        [*cli, "bench", "references", "--out", str(folder)],
        check=True,
        env=env,
        capture_output=True,
    )
    solution = folder / f"{args.problem}.py"
    call = [*cli, "eval", args.problem, str(solution), "--backend", args.backend]
    call += ["--policy", "off", "--json"]

    def timed(extra: list[str]) -> tuple[float, dict]:
        start = time.monotonic()
        proc = subprocess.run([*call, *extra], env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"eval failed: {proc.stderr[-2000:]}")
        return wall, json.loads(proc.stdout)

    start = time.monotonic()
    subprocess.run([*cli, "--version"], env=env, check=True, capture_output=True)
    startup = time.monotonic() - start
    warm_wall, _ = timed(["--no-service"])  # fills the caches (compile baseline)
    rows = []
    modes = (
        ("alone (--no-service)", ["--no-service"]),
        ("serve, worker ready", []),
        ("serve, back to back", []),
    )
    server = None
    try:
        for mode, extra in modes:
            if mode.startswith("serve") and server is None:
                # its log goes to a file: a pipe nobody reads fills and stops the service
                server_log = (cache / "serve.log").open("w")
                server = subprocess.Popen(
                    [*cli, "serve", "--backend", args.backend],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=server_log,
                    text=True,
                )
            for _ in range(args.runs):
                waited = 0.0
                if mode == "serve, worker ready":  # as after an agent's turn: the spare is up
                    waited = _wait_for_ready_spare(env)
                wall, result = timed(extra)
                rows.append((mode, wall, waited, result))
                if mode == "serve, back to back":
                    time.sleep(1.0)
    finally:
        if server is not None:
            stop_start = time.monotonic()
            server.terminate()
            try:
                server.wait(timeout=60)
                print(f"serve stopped {time.monotonic() - stop_start:.1f} s after SIGTERM")
            except subprocess.TimeoutExpired:
                print("serve did not stop within 60 s of SIGTERM: killed", file=sys.stderr)
                server.kill()
                server.wait()
    print(
        f"cuda-agent --version (imports only): {startup:.2f} s; first eval (caches cold): "
        f"{warm_wall:.2f} s"
    )
    print(
        "worker s: request sent -> result; of it, start s: the worker's own start-up still "
        "running (0: a ready spare); waited s: before the call, for the service's spare"
    )
    header = f"{'mode':<22} {'wall s':>7} {'worker s':>9} {'start s':>8} {'phases s':>9}"
    print(f"{header} {'waited s':>9} {'correct':>8}")
    from cuda_agent.core.types import EvalResult

    for mode, wall, waited, shown in rows:
        result = EvalResult.from_dict(shown)
        record = result.record
        phases = sum((record.worker_phases_s if record is not None else {}).values())
        start_s = (result.details.worker_start or {}).get("ready_after_s")
        start_text = "-" if start_s is None else f"{start_s:.2f}"
        worker_s = (result.details.timings_s or {}).get("worker", 0)
        print(
            f"{mode:<22} {wall:>7.2f} {worker_s:>9.2f} "
            f"{start_text:>8} {phases:>9.2f} {waited:>9.2f} {result.correct!s:>8}"
        )
    for mode, _ in modes:
        walls = [w for m, w, _, _ in rows if m == mode]
        print(f"median {mode}: {statistics.median(walls):.2f} s")
    shutil.rmtree(cache, ignore_errors=True)


def _wait_for_ready_spare(env: dict[str, str], timeout_s: float = 300.0) -> float:
    """Seconds until the service answers with a spare worker done warming up."""
    code = (
        "from cuda_agent.evaluator.service import service_info; import sys; "
        "info = service_info(); sys.exit(0 if info and info.get('spares_ready') else 1)"
    )
    start = time.monotonic()
    while time.monotonic() < start + timeout_s:
        if subprocess.run([sys.executable, "-c", code], env=env).returncode == 0:
            return time.monotonic() - start
        time.sleep(0.5)
    raise SystemExit("the service did not start, or its spare never became ready")


if __name__ == "__main__":
    main()
