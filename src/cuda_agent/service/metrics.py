"""The service's Prometheus metrics, as the text exposition format (``GET /metrics``).

Gauges of the job store (jobs by state), the evaluations in flight, results by verdict since
start, per-phase seconds (sum and count, from the results' ``timings_s``), and the pool's
device figures since start (``cluster.ledger``: held fraction, queue wait).

What it does not do: keep history (Prometheus scrapes and keeps it).
"""

from __future__ import annotations

import time

from cuda_agent.cluster.ledger import utilization
from cuda_agent.service.scheduler import Scheduler


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(scheduler: Scheduler) -> str:
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lines.append(f"{name}{labels} {value:g}")

    counts = scheduler.store.counts()
    metric(
        "cuda_agent_jobs",
        "gauge",
        "Jobs in the store by state.",
        [(f'{{state="{s}"}}', float(n)) for s, n in sorted(counts.items())],
    )
    metric(
        "cuda_agent_queue_depth", "gauge", "Jobs waiting to run.", [("", float(counts["queued"]))]
    )
    metric(
        "cuda_agent_running", "gauge", "Evaluations in flight.", [("", float(scheduler.running))]
    )
    counters = scheduler.counters
    with counters.lock:
        verdicts = dict(counters.verdicts)
        seconds = dict(counters.phase_seconds)
        phase_counts = dict(counters.phase_counts)
    metric(
        "cuda_agent_results_total",
        "counter",
        "Results stored since start, by verdict (correct, or the stage that failed).",
        [(f'{{verdict="{_escape(v)}"}}', float(n)) for v, n in sorted(verdicts.items())],
    )
    metric(
        "cuda_agent_phase_seconds_sum",
        "counter",
        "Seconds spent per pipeline phase since start.",
        [(f'{{phase="{_escape(p)}"}}', s) for p, s in sorted(seconds.items())],
    )
    metric(
        "cuda_agent_phase_seconds_count",
        "counter",
        "Evaluations that went through each phase since start.",
        [(f'{{phase="{_escape(p)}"}}', float(n)) for p, n in sorted(phase_counts.items())],
    )
    pool = scheduler.pool
    figures = utilization(pool.ledger, pool.devices, time.monotonic() - scheduler.started, [])
    metric(
        "cuda_agent_device_held_fraction",
        "gauge",
        "Share of the devices' time held by evaluations since start.",
        [("", float(figures.get("device_held_fraction", 0.0)))],
    )
    wait = figures.get("queue_wait_s") or {}
    metric(
        "cuda_agent_device_queue_wait_seconds_sum",
        "counter",
        "Seconds evaluations waited for a device since start.",
        [("", float(wait.get("total", 0.0)))],
    )
    metric(
        "cuda_agent_device_queue_wait_seconds_count",
        "counter",
        "Evaluations that waited for a device since start.",
        [("", float(wait.get("jobs", 0)))],
    )
    return "\n".join(lines) + "\n"
