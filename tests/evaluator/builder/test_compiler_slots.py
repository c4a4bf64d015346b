"""Compiler steps take a slot each: no more compilers at once than the host has slots."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cuda_agent.evaluator.builder import compiler_slots, units


@pytest.fixture
def one_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiler_slots.JOBS_ENV, "1")
    monkeypatch.setattr(compiler_slots, "_slots", None)  # made again with the new count


def test_a_step_waits_for_a_slot_and_gives_up_at_its_deadline(
    one_slot: None, tmp_path: Path
) -> None:
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with compiler_slots.compiler_slot(time.monotonic() + 600) as got:
            assert got
            held.set()
            release.wait(600)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(600)
        ok, log = units.run_compiler(["true"], tmp_path, time.monotonic() + 0.2)
        assert not ok and "waiting for a free compiler slot" in log
    finally:
        release.set()
        thread.join()
    ok, log = units.run_compiler(["true"], tmp_path, time.monotonic() + 600)
    assert ok, log


def test_the_slot_count_follows_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiler_slots.JOBS_ENV, "3")
    assert compiler_slots.slot_count() == 3
    monkeypatch.setenv(compiler_slots.JOBS_ENV, "zero")
    assert compiler_slots.slot_count() >= 1
