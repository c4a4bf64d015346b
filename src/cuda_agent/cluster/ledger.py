"""How busy a pool kept its devices: queue waits and the time each device was held.

A pool records, for every job that reached a device, when it started waiting for one, when it
got it and when it gave it back (``DeviceLedger.wait`` / ``held``). ``utilization`` turns that,
with the jobs' own phase times (their results' ``timings_s`` and ``worker_phases_s``), into the
figures ``bench run`` prints and writes to ``run.json``:

* ``device_held_fraction``: the union of the intervals each device was held by a job, summed
  over the devices, over ``wall_s`` times the number of devices (overlapping jobs on a shared
  device count once);
* ``device_work_fraction``: the workers' own measured phases (reference and inputs, import,
  verification, timing: the device-exclusive work) over the same;
* ``queue_wait_s``: total, mean and max seconds jobs waited for a device;
* ``longest_hold_s``: the longest time one job held a device (its worker, memory check and
  baselines; bounded by the device budget, docs/evaluation.md);
* ``phases_s``: each pipeline stage's seconds summed over the jobs (static, build, worker,
  memory, baseline, shapes), and the workers' start-up seconds;
* ``worker_phases_s``: the evaluation workers' own phases summed over the jobs (reference and
  inputs, import, verify, kernel record, time, stream check, profile), with the seconds they
  waited for the device's shared and exclusive turns (``wait_shared``, ``wait_exclusive``,
  ``worker/device_turn.py``; not counted as device work);
* ``memory_check_phases_s``: the memory checks' own phases summed over the jobs (the checked
  worker's start under the checker, the reference, the import, the checked forward; a cached
  answer adds nothing), and ``memory_checks``: how many ran, were answered from the cache, and
  instrumented only the candidate's kernels;
* ``exclusive_s`` / ``exclusive_fraction``: the seconds jobs held their device alone to
  measure (kernel record, time, stream check, profile), the part of a verdict no other job can
  overlap: the bound on verdicts per device-hour.

``describe`` is the line ``bench run`` prints; ``LEGEND`` says what its terms mean (printed
after it). What it does not do: measure the GPU itself (no NVML); "held" is the pool's view.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from cuda_agent.core.types import EvalResult


class DeviceLedger:
    """Thread-safe record of queue waits and device holds (monotonic seconds)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waits: list[float] = []
        self._holds: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.started = time.monotonic()

    def wait(self, seconds: float) -> None:
        with self._lock:
            self._waits.append(seconds)

    def held(self, device: str, start: float, end: float) -> None:
        with self._lock:
            self._holds[device].append((start, end))

    def snapshot(self) -> tuple[list[float], dict[str, list[tuple[float, float]]]]:
        with self._lock:
            return list(self._waits), {d: list(h) for d, h in self._holds.items()}


WAIT_PREFIX = "wait_"  # a worker phase spent waiting for the device's turn
# the worker phases run with the device alone (worker/device_turn.py)
EXCLUSIVE_PHASES = ("kernel_record", "time", "stream_check", "profile")


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def utilization(
    ledger: DeviceLedger | None,
    devices: list[str],
    wall_s: float,
    results: Iterable[EvalResult],
) -> dict[str, Any]:
    """The figures of the module docstring for a run of ``wall_s`` seconds on ``devices``."""
    phases: dict[str, float] = defaultdict(float)
    worker_phases: dict[str, float] = defaultdict(float)
    memory_phases: dict[str, float] = defaultdict(float)
    checks = {"ran": 0, "cached": 0, "own_kernels": 0}
    starts = 0.0
    for result in results:
        details, record = result.details, result.record
        memory = details.memory_check or {}
        if memory:
            checks["cached" if memory.get("cached") else "ran"] += 1
            checks["own_kernels"] += str(memory.get("scope", "")).startswith("own kernels")
        for phase, seconds in (memory.get("phases_s") or {}).items():
            if isinstance(seconds, (int, float)):
                memory_phases[phase] += float(seconds)
        for stage, seconds in (details.timings_s or {}).items():
            if isinstance(seconds, (int, float)):
                phases[stage] += float(seconds)
        for phase, seconds in (record.worker_phases_s if record is not None else {}).items():
            if isinstance(seconds, (int, float)):
                worker_phases[phase] += float(seconds)
        ready = (details.worker_start or {}).get("ready_after_s")
        if isinstance(ready, (int, float)):
            starts += float(ready)
    work = sum(v for k, v in worker_phases.items() if not k.startswith(WAIT_PREFIX))
    exclusive = sum(worker_phases.get(k, 0.0) for k in EXCLUSIVE_PHASES)
    capacity = max(wall_s, 1e-9) * max(1, len(devices))
    out: dict[str, Any] = {
        "wall_s": round(wall_s, 3),
        "devices": len(devices),
        "device_work_s": round(work, 3),
        "device_work_fraction": round(min(1.0, work / capacity), 4),
        "exclusive_s": round(exclusive, 3),
        "exclusive_fraction": round(min(1.0, exclusive / capacity), 4),
        "phases_s": {k: round(v, 3) for k, v in sorted(phases.items())},
        "worker_phases_s": {k: round(v, 3) for k, v in sorted(worker_phases.items())},
        "worker_start_s": round(starts, 3),
        "memory_check_phases_s": {k: round(v, 3) for k, v in sorted(memory_phases.items())},
        "memory_checks": checks,
    }
    if ledger is not None:
        waits, holds = ledger.snapshot()
        held = sum(_union(h) for h in holds.values())
        out["device_held_s"] = round(held, 3)
        out["device_held_fraction"] = round(min(1.0, held / capacity), 4)
        spans = [stop - start for h in holds.values() for start, stop in h]
        out["longest_hold_s"] = round(max(spans), 3) if spans else 0.0
        out["queue_wait_s"] = {
            "total": round(sum(waits), 3),
            "mean": round(sum(waits) / len(waits), 3) if waits else 0.0,
            "max": round(max(waits), 3) if waits else 0.0,
            "jobs": len(waits),
        }
    return out


LEGEND = (
    "devices held: the share of the run's wall time the devices were given to a job; device "
    "work: the share the workers spent on device work (reference and inputs, import, "
    "verification, timing); held alone to measure: the share a job held its device alone, "
    "to time and profile (what bounds verdicts per device-hour); docs/benchmarking.md"
)


def describe(figures: dict[str, Any]) -> str:
    """One line for a terminal: ``devices busy 73% of 412 s (device work 61%) | ...``."""
    parts = []
    if "device_held_fraction" in figures:
        parts.append(
            f"devices held {figures['device_held_fraction']:.0%} of {figures['wall_s']:.0f} s "
            f"(device work {figures['device_work_fraction']:.0%})"
        )
        wait = figures["queue_wait_s"]
        parts.append(f"queue wait mean {wait['mean']:.1f} s, max {wait['max']:.1f} s")
        parts.append(f"longest hold {figures.get('longest_hold_s', 0.0):.0f} s")
    else:
        parts.append(
            f"device work {figures['device_work_fraction']:.0%} of {figures['wall_s']:.0f} s"
        )
    if figures.get("exclusive_s"):
        parts.append(f"held alone to measure {figures['exclusive_fraction']:.0%}")
    stages = ", ".join(f"{k} {v:.0f} s" for k, v in figures["phases_s"].items())
    parts.append(f"phases: {stages or 'none'}; worker start-up {figures['worker_start_s']:.0f} s")
    return " | ".join(parts)
