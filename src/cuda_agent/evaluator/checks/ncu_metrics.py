"""Nsight Compute metrics for the candidate's kernels (agent feedback, ``--profile``).

Runs the candidate's forward in a ``ncu_profile`` worker under ``ncu``, restricted to the NVTX
range around the candidate's calls, and summarises a few metrics per kernel: compute and memory
throughput as % of peak, achieved occupancy, DRAM bytes, duration. Optional: skipped (with a
note) when ``ncu`` is not installed or cannot read the GPU's counters. Never part of a verdict.
"""

from __future__ import annotations

import csv
import io
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.launch.worker_process import run_worker
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.evaluator.worker.protocol import WorkerRequest

METRICS = {
    "gpu__time_duration.sum": "duration_us",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "dram__bytes.sum": "dram_bytes",
}
LAUNCH_LIMIT = 20


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    for candidate in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"):
        if Path(candidate).exists():
            return candidate
    return None


def ncu_metrics(
    request: WorkerRequest,
    scratch: Path,
    files: dict[str, str],
    sandboxed: bool = False,
    timeout_s: float = 300.0,
) -> dict[str, Any]:
    """``{"kernels": [...]}`` for the candidate's kernels, or ``{"error": ...}``."""
    ncu = find_ncu()
    if ncu is None:
        return {"error": "ncu not found"}
    scratch.mkdir(parents=True, exist_ok=True)
    log = scratch / "ncu.csv"
    prefix = [
        ncu,
        "--csv",
        "--log-file",
        str(log),
        "--nvtx",
        "--nvtx-include",
        "candidate/",
        "--metrics",
        ",".join(METRICS),
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--launch-count",
        str(LAUNCH_LIMIT),
    ]
    outcome = run_worker(
        replace(request, mode="ncu_profile"),
        timeout_s=timeout_s,
        scratch=scratch,
        env=worker_env(),
        prefix=prefix,
        files=files,
        sandboxed=sandboxed,
    )
    text = log.read_text(errors="replace") if log.exists() else ""
    kernels = parse_ncu_csv(text)
    if not kernels:
        record = outcome.record
        if record is None:
            reason = outcome.death_reason()
        else:
            reason = record.message if not record.ok else "no kernel was profiled"
        tail = [ln for ln in text.splitlines() if ln.startswith("==ERROR==")][:2]
        return {"error": f"ncu produced no metrics ({reason}) {' '.join(tail)}".strip()}
    return {"kernels": kernels}


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Per-kernel metrics (averaged over launches) from ncu's ``--csv`` details output."""
    rows = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not rows:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(rows)))
    per_launch: dict[str, dict[str, Any]] = {}
    for row in reader:
        metric = row.get("Metric Name", "")
        if metric not in METRICS:
            continue
        launch = per_launch.setdefault(row.get("ID", ""), {"name": row.get("Kernel Name", "")})
        launch[METRICS[metric]] = _number(row.get("Metric Value", ""), row.get("Metric Unit", ""))
    per_kernel: dict[str, dict[str, Any]] = {}
    for launch in per_launch.values():
        entry = per_kernel.setdefault(launch["name"], {"name": launch["name"][:160], "launches": 0})
        entry["launches"] += 1
        for key in METRICS.values():
            if key in launch:
                entry[key] = entry.get(key, 0.0) + launch[key]
    out = []
    for entry in per_kernel.values():
        n = entry["launches"]
        for key in METRICS.values():
            if key in entry:
                entry[key] = round(entry[key] / n, 3)
        out.append(entry)
    return sorted(out, key=lambda e: -float(e.get("duration_us", 0.0)))


def _number(value: str, unit: str) -> float:
    try:
        number = float(value.replace(",", ""))
    except ValueError:
        return 0.0
    scale = {
        "nsecond": 1e-3,
        "ns": 1e-3,
        "usecond": 1.0,
        "us": 1.0,
        "msecond": 1e3,
        "ms": 1e3,
        "second": 1e6,
        "s": 1e6,
        "Kbyte": 1e3,
        "KB": 1e3,
        "Mbyte": 1e6,
        "MB": 1e6,
        "Gbyte": 1e9,
        "GB": 1e9,
        "Tbyte": 1e12,
        "TB": 1e12,
    }
    return number * scale.get(unit, 1.0)
