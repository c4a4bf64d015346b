"""A job board: which jobs a pool holds and what each is doing now, for progress reports.

Pools record each job's phase as it moves (``queued``, ``build``, ``device-wait``, the
worker's stages ``load`` / ``verify`` / ``time`` / ``profile``, ``baseline``); a reporter reads
``snapshot()`` to say how many jobs are in each phase and which have been running longest, so a
run that stalls says where. Thread-safe; knows nothing about how jobs run.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class JobState:
    key: str
    phase: str
    since: float  # monotonic time the job entered this phase
    started: float  # monotonic time the job was submitted


@dataclass(frozen=True)
class Snapshot:
    done: int
    phases: dict[str, int]  # phase -> jobs in it (queued included)
    oldest: list[JobState]  # running jobs, longest in their phase first

    def running(self) -> int:
        return sum(n for phase, n in self.phases.items() if phase != "queued")


class JobBoard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[int, JobState] = {}
        self._ids = itertools.count()
        self._done = 0

    def add(self, key: str) -> int:
        now = time.monotonic()
        with self._lock:
            ident = next(self._ids)
            self._jobs[ident] = JobState(key, "queued", now, now)
        return ident

    def move(self, ident: int, phase: str) -> None:
        with self._lock:
            state = self._jobs.get(ident)
            if state is not None and state.phase != phase:
                self._jobs[ident] = JobState(state.key, phase, time.monotonic(), state.started)

    def finish(self, ident: int) -> None:
        with self._lock:
            if self._jobs.pop(ident, None) is not None:
                self._done += 1

    def snapshot(self, oldest: int = 3) -> Snapshot:
        with self._lock:
            states = list(self._jobs.values())
            done = self._done
        phases: dict[str, int] = {}
        for state in states:
            phases[state.phase] = phases.get(state.phase, 0) + 1
        running = sorted((s for s in states if s.phase != "queued"), key=lambda s: s.since)
        return Snapshot(done, dict(sorted(phases.items())), running[:oldest])


def describe(snapshot: Snapshot, now: float | None = None) -> str:
    """``done 12 | running 4 (build 1, verify 2, time 1) | queued 30 | oldest: L1_5 verify 41 s``"""
    now = time.monotonic() if now is None else now
    queued = snapshot.phases.get("queued", 0)
    busy = ", ".join(f"{p} {n}" for p, n in snapshot.phases.items() if p != "queued")
    text = f"done {snapshot.done} | running {snapshot.running()}"
    text += f" ({busy})" if busy else ""
    text += f" | queued {queued}"
    if snapshot.oldest:
        ages = ", ".join(f"{s.key} {s.phase} {now - s.since:.0f} s" for s in snapshot.oldest)
        text += f" | longest: {ages}"
    return text
