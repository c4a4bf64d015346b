"""A job board: which jobs a pool holds and what each is doing now, for progress reports.

Pools record each job's phase as it moves (``queued``, ``build``, ``device-wait``, the
worker's stages ``load`` / ``verify`` / ``time`` / ``profile``, ``baseline``); a reporter reads
``snapshot()`` to say how many jobs are in each phase, which job holds each device and in
which phase (``assign``: the pool names the device, ``GPU 0``, when a job takes it), and which
other jobs have been running longest, so a run that stalls says where. A device that held a job
once is listed from then on (``idle`` when free). Thread-safe; knows nothing about how jobs run.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class JobState:
    key: str
    phase: str
    since: float  # monotonic time the job entered this phase
    started: float  # monotonic time the job was submitted
    device: str = ""  # the device the job holds now ("": none)


@dataclass(frozen=True)
class Snapshot:
    done: int
    phases: dict[str, int]  # phase -> jobs in it (queued included)
    oldest: list[JobState]  # running jobs on no device, longest in their phase first
    devices: dict[str, list[JobState]] = field(default_factory=dict)  # device -> its jobs

    def running(self) -> int:
        return sum(n for phase, n in self.phases.items() if phase != "queued")


class JobBoard:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[int, JobState] = {}
        self._ids = itertools.count()
        self._done = 0
        self._devices: set[str] = set()

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
                self._jobs[ident] = replace(state, phase=phase, since=time.monotonic())

    def assign(self, ident: int, device: str) -> None:
        """The job now holds ``device`` (a label such as ``GPU 0``); "" when it gives it back."""
        with self._lock:
            state = self._jobs.get(ident)
            if state is not None:
                self._jobs[ident] = replace(state, device=device)
            if device:
                self._devices.add(device)

    def finish(self, ident: int) -> None:
        with self._lock:
            if self._jobs.pop(ident, None) is not None:
                self._done += 1

    def snapshot(self, oldest: int = 3) -> Snapshot:
        with self._lock:
            states = list(self._jobs.values())
            done = self._done
            devices: dict[str, list[JobState]] = {d: [] for d in sorted(self._devices)}
        phases: dict[str, int] = {}
        for state in states:
            phases[state.phase] = phases.get(state.phase, 0) + 1
        by_age = sorted(states, key=lambda s: s.since)
        for state in by_age:
            if state.device:
                devices.setdefault(state.device, []).append(state)
        running = [s for s in by_age if s.phase != "queued" and not s.device]
        return Snapshot(done, dict(sorted(phases.items())), running[:oldest], devices)


def describe(snapshot: Snapshot, now: float | None = None) -> str:
    """``done 12 | running 4 (build 1, verify 2, time 1) | queued 30 | GPU 0: L1_5 verify 41 s
    | GPU 1: idle | longest: L1_9 build 12 s``"""
    now = time.monotonic() if now is None else now
    queued = snapshot.phases.get("queued", 0)
    busy = ", ".join(f"{p} {n}" for p, n in snapshot.phases.items() if p != "queued")
    text = f"done {snapshot.done} | running {snapshot.running()}"
    text += f" ({busy})" if busy else ""
    text += f" | queued {queued}"
    for device, jobs in snapshot.devices.items():
        text += f" | {device}: {_ages(jobs, now) or 'idle'}"
    if snapshot.oldest:
        text += f" | longest: {_ages(snapshot.oldest, now)}"
    return text


def _ages(states: list[JobState], now: float) -> str:
    """``L1_5 verify 41 s, L1_9 build 12 s``"""
    return ", ".join(f"{s.key} {s.phase} {now - s.since:.0f} s" for s in states)
