"""One task in its own process, so that a crash, a CUDA error or a hang costs only that task.

``run_worker`` runs ``kernelbench_peer.py _worker TASK PAYLOAD RESULT`` (the entry point's
``worker_main`` and ``WORKER_TASKS`` do the task there) with its output appended to the log,
and returns the task's result with the process's wall time, or the reason there is none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENTRY = Path(__file__).resolve().parent.parent / "kernelbench_peer.py"


def run_worker(
    task: str, payload: dict[str, Any], log_path: Path, timeout: float, env: dict | None = None
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kbpeer-w-") as tmp:
        result_path = Path(tmp) / "result.json"
        cmd = [sys.executable, str(ENTRY), "_worker", task, json.dumps(payload), str(result_path)]
        start = time.perf_counter()
        with open(log_path, "a") as log:
            log.write(f"\n===== worker {task} {json.dumps(payload)}\n")
            log.flush()
            try:
                proc = subprocess.run(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    env={**os.environ, **(env or {})},
                    check=False,
                )
                rc: int | None = proc.returncode
            except subprocess.TimeoutExpired:
                rc = None
        wall = time.perf_counter() - start
        out = json.loads(result_path.read_text()) if result_path.is_file() else {}
        out["process_wall_s"] = wall
        if rc is None:
            out.setdefault("error", f"worker timed out after {timeout:.0f} s")
        elif rc != 0:
            out.setdefault("error", f"worker exited with status {rc} (see log)")
        return out
