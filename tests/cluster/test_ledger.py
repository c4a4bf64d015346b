"""The pool's ledger: queue waits, device holds and the busy fractions bench run reports."""

from __future__ import annotations

from cuda_agent.cluster.ledger import DeviceLedger, describe, utilization
from tests.helpers import verdict


def test_overlapping_holds_of_one_device_count_once() -> None:
    ledger = DeviceLedger()
    ledger.held("0", 10.0, 20.0)
    ledger.held("0", 15.0, 25.0)  # two jobs sharing the device
    ledger.held("1", 10.0, 12.0)
    ledger.wait(0.5)
    ledger.wait(1.5)
    results = [
        {
            "details": {
                "timings_s": {"build": 2.0, "worker": 9.0},
                "worker_phases_s": {
                    "wait_shared": 0.5,
                    "verify": 3.0,
                    "wait_exclusive": 1.0,
                    "time": 4.0,
                },
                "worker_start": {"ready_after_s": 0.25},
            }
        },
        {"details": {"timings_s": {"static": 0.1, "build": 1.0}}},
    ]
    figures = utilization(ledger, ["0", "1"], 20.0, [verdict(**r) for r in results])
    assert figures["device_held_s"] == 17.0  # 15 on device 0 (10-25), 2 on device 1
    assert figures["device_held_fraction"] == round(17.0 / 40.0, 4)
    assert figures["device_work_s"] == 7.0 and figures["device_work_fraction"] == round(7 / 40, 4)
    assert figures["queue_wait_s"] == {"total": 2.0, "mean": 1.0, "max": 1.5, "jobs": 2}
    assert figures["longest_hold_s"] == 10.0  # one job's hold, not the device's union
    assert figures["phases_s"] == {"build": 3.0, "static": 0.1, "worker": 9.0}
    assert figures["worker_start_s"] == 0.25
    # waiting for a turn is not device work; what ran alone is the timing
    assert figures["worker_phases_s"]["wait_exclusive"] == 1.0
    assert figures["exclusive_s"] == 4.0 and figures["exclusive_fraction"] == 0.1
    line = describe(figures)
    assert line.startswith("devices held 42% of 20 s (device work 18%)") and "max 1.5 s" in line
    assert "longest hold 10 s" in line and "held alone to measure 10%" in line


def test_without_a_ledger_only_the_results_speak() -> None:
    figures = utilization(None, ["cpu0"], 0.0, [])
    assert "device_held_fraction" not in figures and figures["device_work_fraction"] == 0.0
    assert describe(figures).startswith("device work 0% of 0 s")


def test_memory_checks_are_counted_and_their_phases_summed() -> None:
    """A run's memory checks: how many ran, how many were answered from the cache, how many
    instrumented only the candidate's kernels, and their own phases summed (a cached answer
    has none)."""
    checked = {
        "scope": "own kernels (3 names)",
        "cached": False,
        "phases_s": {"start": 4.0, "checked_forward": 0.5},
    }
    results = [
        {"details": {"memory_check": checked}},
        {"details": {"memory_check": {**checked, "scope": "every kernel"}}},
        {"details": {"memory_check": {**checked, "cached": True, "phases_s": {}}}},
        {"details": {"timings_s": {"static": 0.1}}},  # no check: a failed candidate
    ]
    figures = utilization(None, ["0"], 10.0, [verdict(**r) for r in results])
    assert figures["memory_checks"] == {"ran": 2, "cached": 1, "own_kernels": 2}
    assert figures["memory_check_phases_s"] == {"checked_forward": 1.0, "start": 8.0}
