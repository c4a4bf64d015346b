"""Wall time of one `cuda-agent eval` from the shell: alone, and with `cuda-agent serve` running.

Usage: python benchmarks/eval_cli_latency.py [--backend cuda] [--runs 3] [--problem relu]

The candidate has nothing to build (the problem's own reference renamed ModelNew, policy off),
as in the measurement that motivated the service (15.8 s on an H200). A first call warms the
caches (the torch.compile baseline); then each mode runs ``--runs`` times. Alone, every call
starts Python, imports the command, starts a worker (torch, CUDA context, dynamo) and
evaluates. With the service, the call connects to a process that keeps a started worker ready.
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
    for mode, extra in (("alone (--no-service)", ["--no-service"]), ("with serve", [])):
        server = None
        if mode == "with serve":
            # its log goes to a file: a pipe nobody reads fills and stops the service
            server_log = (cache / "serve.log").open("w")
            server = subprocess.Popen(
                [*cli, "serve", "--backend", args.backend],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=server_log,
                text=True,
            )
            _wait_for_service(env)
            time.sleep(2.0)  # its spare worker finishes its warm start
        try:
            for _ in range(args.runs):
                wall, result = timed(extra)
                rows.append((mode, wall, result))
                time.sleep(1.0)  # the replacement spare warms up, as between agent turns
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
    print(f"{'mode':<22} {'wall s':>7} {'worker s':>9} {'phases s':>9} {'correct':>8}")
    for mode, wall, result in rows:
        stages = result["details"]["timings_s"]
        phases = sum(result["details"].get("worker_phases_s", {}).values())
        print(
            f"{mode:<22} {wall:>7.2f} {stages.get('worker', 0):>9.2f} {phases:>9.2f} "
            f"{result['correct']!s:>8}"
        )
    for mode in ("alone (--no-service)", "with serve"):
        walls = [w for m, w, _ in rows if m == mode]
        print(f"median {mode}: {statistics.median(walls):.2f} s")
    shutil.rmtree(cache, ignore_errors=True)


def _wait_for_service(env: dict[str, str], timeout_s: float = 300.0) -> None:
    code = (
        "from cuda_agent.evaluator.service import service_info; "
        "import sys; sys.exit(0 if service_info() else 1)"
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if subprocess.run([sys.executable, "-c", code], env=env).returncode == 0:
            return
        time.sleep(1.0)
    raise SystemExit("the service did not start")


if __name__ == "__main__":
    main()
