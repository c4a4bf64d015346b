"""Run one request in a worker process and collect its nonce-tagged record.

The worker (a spare one from ``spare_workers.py`` if given, otherwise one ``worker_spawn.py``
starts) gets a fresh session (process group), a hard deadline (the whole group is killed
when it passes), its stdout/stderr sent to files, and a private pipe for JSON lines. Only a line
with the request's nonce and type ``result`` counts, parsed once here into the record of the
request's mode (``core/records.py``); a worker that dies or hangs yields ``record is None`` with
the reason (signal, timeout) and the tail of its stderr. With a device budget
(``evaluator/device_budget.py``), the deadline is shortened once, when the worker reports the
stage ``verify``, to now + the budget for the reference's call time the worker reported before
any candidate code ran (its first ``reference`` line; later ones are ignored); the outcome says
whether the budget's end, not the timeout's, stopped it. The budget's clock stops while the
worker waits for its turn on a device shared with other jobs (a ``turn`` line ``waiting``, then
``held``; ``worker/device_turn.py``): the budget counts the candidate's own time. Candidate code
could forge a ``waiting`` line (the nonce is in its process); that only stops its budget, and
the timeout still ends it. A sandboxed worker runs under the
strongest isolation available (``worker_spawn.worker_sandbox``); the outcome names it.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.core.cancel import requested
from cuda_agent.core.records import R, WorkerRecord, parse_record
from cuda_agent.evaluator.launch.asan import AsanRun
from cuda_agent.evaluator.launch.host_memory import MemoryWatch, killed_by_oom, oom_kills
from cuda_agent.evaluator.launch.process_group import kill_group_and_wait
from cuda_agent.evaluator.launch.spare_workers import SpareWorkers
from cuda_agent.evaluator.launch.worker_spawn import kill_group, spawn_worker, worker_env
from cuda_agent.evaluator.launch.worker_template import ForkedWorker
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.workspace.isolation import NONE

TAIL_BYTES = 4000
EXIT_GRACE_S = 5.0


Budget = Callable[[float | None], float | None]  # reference call s -> budget s (None: none)


@dataclass
class WorkerOutcome:
    record: WorkerRecord | None  # the mode's record, parsed from its result line
    last_stage: str = ""
    timed_out: bool = False
    returncode: int | None = None
    seconds: float = 0.0
    stdout_tail: str = ""
    stderr_tail: str = ""
    events: list[dict[str, Any]] = field(default_factory=list)
    isolation: str = NONE
    # where the worker came from ("spare" or "fresh") and how long after the request it said
    # it had finished its warm start (0.0: it had already; None: it never said)
    source: str = "fresh"
    ready_after_s: float | None = None
    forked: bool = False  # forked from a template (else started as a process of its own)
    # the device budget: the reference's call time the worker reported (before any candidate
    # code ran), the budget armed at ``verify`` (None: none armed), and whether its end (not
    # the timeout's) stopped the worker
    reference_call_s: float | None = None
    device_budget_s: float | None = None
    over_budget: bool = False
    turn_wait_s: float = 0.0  # time the budget's clock stood while the worker awaited its turn
    cancelled: bool = False  # the caller's ``cancel`` was set: the worker was killed
    # the host-memory watch (cuda workers): its cap, the most it saw, whether the worker was
    # killed for passing the cap; and whether the kernel's OOM killer killed it
    host_memory_cap: int | None = None
    host_memory_peak: int = 0
    memory_capped: bool = False
    oom_killed: bool = False

    def record_of(self, kind: type[R]) -> R | None:
        """The record, typed as the request's mode's ``kind`` (None if the worker gave none)."""
        if self.record is not None and not isinstance(self.record, kind):
            raise TypeError(f"a {type(self.record).__name__} where a {kind.__name__} was expected")
        return self.record

    @property
    def signal_number(self) -> int | None:
        """The signal that killed the worker (None: it exited, or has no status yet)."""
        code = self.returncode
        if code is not None and 128 < code <= 128 + 64:  # the sandbox reports 128 + signal
            return code - 128
        return -code if code is not None and code < 0 else None

    @property
    def killed_by_sigkill(self) -> bool:
        return self.signal_number == signal.SIGKILL

    def death_reason(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.memory_capped:
            return "was stopped past its host-memory cap"
        if self.oom_killed:
            return "was killed by the system's out-of-memory killer"
        code = self.returncode
        number = self.signal_number
        if number is not None:
            code = -number
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited (status {code}) without a result"


def run_worker(
    request: WorkerRequest,
    *,
    timeout_s: float,
    scratch: Path,
    env: dict[str, str] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    spares: SpareWorkers | None = None,
    spare_depth: int = 1,
    prefix: list[str] | None = None,
    files: dict[str, str] | None = None,
    sandboxed: bool = False,
    allow_unsandboxed: bool = False,
    budget: Budget | None = None,
    address_space_limit: bool = True,
    cancel: threading.Event | None = None,
    host_memory_cap: int | None = None,
    asan: AsanRun | None = None,
) -> WorkerOutcome:
    """Send ``request`` to a fresh worker (a spare one if given) and collect its record.

    ``files`` (relative path -> text) are written to the worker's own folder first and become
    the request's ``solution_root``: the only place a sandboxed worker can write.
    ``budget(reference_call_s)``: the device budget in seconds (None: none), asked when the
    worker reports ``verify`` (see the module docstring). ``cancel``: once set, the worker is
    killed within a second and the outcome says ``cancelled``. ``host_memory_cap`` (bytes):
    the worker's tree is killed once its anonymous resident memory passes it (``memory_capped``).
    ``asan``: the worker runs under AddressSanitizer (``asan.py``; never a spare).
    """
    env = env or worker_env()
    pool = spares if not prefix and asan is None else None  # the spares this worker may take
    if pool is not None:
        handle = pool.take(request.settings.backend, env, sandboxed, spare_depth, allow_unsandboxed)
    else:
        handle = spawn_worker(
            request.settings.backend,
            env,
            scratch,
            prefix,
            sandboxed,
            allow_unsandboxed,
            address_space_limit,
            asan,
        )
    if files is not None:
        root = handle.folder / "solution"
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if handle.sandbox is not None:
            handle.sandbox.grant(root)
        request.solution_root = str(root)
    request.result_fd = handle.child_fd
    request.nonce = secrets.token_hex(16)
    start = time.monotonic()
    proc = handle.proc
    outcome = WorkerOutcome(
        record=None,
        isolation=handle.isolation,
        source="spare" if pool is not None else "fresh",
        ready_after_s=0.0 if handle.ready else None,
        forked=isinstance(proc, ForkedWorker),
        host_memory_cap=host_memory_cap,
    )
    watch = MemoryWatch(proc.pid, host_memory_cap) if host_memory_cap is not None else None
    oom_before = oom_kills()
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write((request.to_json() + "\n").encode("utf-8"))
            proc.stdin.close()
        deadline = Deadline(start + timeout_s, budget)
        _read_records(handle.read_fd, request, start, deadline, outcome, on_event, cancel, watch)
    finally:
        os.close(handle.read_fd)
        if outcome.timed_out or outcome.cancelled or outcome.memory_capped:
            kill_group(proc)
        # a worker that closed its pipe is exiting: let it, so its signal can be reported
        grace = (
            EXIT_GRACE_S
            if outcome.record is None
            else max(1.0, start + timeout_s - time.monotonic())
        )
        try:
            outcome.returncode = proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            outcome.timed_out = outcome.record is not None or outcome.timed_out
            kill_group(proc)
            outcome.returncode = proc.wait()
        # nothing the candidate left behind survives the evaluation, not even for a moment
        kill_group_and_wait(proc.pid)
    if watch is not None:
        outcome.host_memory_peak = watch.peak_bytes
    outcome.oom_killed = (
        outcome.record is None
        and not (outcome.timed_out or outcome.cancelled or outcome.memory_capped)
        and outcome.killed_by_sigkill
        and killed_by_oom(oom_before, oom_kills())
    )
    outcome.seconds = time.monotonic() - start
    outcome.stdout_tail = _tail(handle.folder / "worker.stdout")
    outcome.stderr_tail = _tail(handle.folder / "worker.stderr")
    if spares is not None:
        shutil.rmtree(handle.folder, ignore_errors=True)
    return outcome


@dataclass
class Deadline:
    """A worker's deadline: the timeout's, shortened once (at ``verify``) by the budget, whose
    clock stands while the worker waits for its turn on a shared device."""

    timeout_at: float
    budget: Budget | None = None
    budget_at: float | None = None
    reference_seen: bool = False
    armed: bool = False
    waiting_since: float | None = None  # the worker said it waits for its turn (None: not)

    @property
    def at(self) -> float:
        if self.budget_at is None or self.waiting_since is not None:
            return self.timeout_at
        return min(self.timeout_at, self.budget_at)

    def turn(self, message: dict[str, Any], outcome: WorkerOutcome) -> None:
        """A ``turn`` line: ``waiting`` stops the budget's clock, ``held`` starts it again
        (the budget's end moves by the wait)."""
        state, now = message.get("state"), time.monotonic()
        if state == "waiting" and self.waiting_since is None:
            self.waiting_since = now
        elif state == "held" and self.waiting_since is not None:
            waited = now - self.waiting_since
            self.waiting_since = None
            outcome.turn_wait_s += waited
            if self.budget_at is not None:
                self.budget_at += waited

    @property
    def budget_ends_first(self) -> bool:
        """Whether the budget, not the timeout, ends the worker now (never while it waits)."""
        return (
            self.waiting_since is None
            and self.budget_at is not None
            and self.budget_at < self.timeout_at
        )

    def reference(self, message: dict[str, Any], outcome: WorkerOutcome) -> None:
        """The first ``reference`` line only: it comes before any candidate code runs."""
        if not self.reference_seen:
            self.reference_seen = True
            outcome.reference_call_s = _seconds(message.get("call_s"))

    def arm(self, outcome: WorkerOutcome) -> None:
        """At the first ``verify``: the deadline becomes now + budget, if that is sooner."""
        if self.armed or self.budget is None:
            return
        self.armed = True
        seconds = self.budget(outcome.reference_call_s)
        if seconds is not None:
            outcome.device_budget_s = seconds
            self.budget_at = time.monotonic() + seconds


def _seconds(value: Any) -> float | None:
    """A non-negative finite number of seconds, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value < float("inf") else None


def _read_records(
    fd: int,
    request: WorkerRequest,
    start: float,
    deadline: Deadline,
    outcome: WorkerOutcome,
    on_event: Callable[[dict[str, Any]], None] | None,
    cancel: threading.Event | None = None,
    watch: MemoryWatch | None = None,
) -> None:
    buffer = b""
    wait_s = 1.0 if watch is None else watch.interval_s
    while True:
        if requested(cancel):
            outcome.cancelled = True
            return
        if watch is not None and watch.look():
            outcome.memory_capped = True
            return
        remaining = deadline.at - time.monotonic()
        if remaining <= 0:
            outcome.timed_out = True
            outcome.over_budget = deadline.budget_ends_first
            return
        ready, _, _ = select.select([fd], [], [], min(remaining, wait_s))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line == b"ready" and outcome.ready_after_s is None:  # its warm start is over
                outcome.ready_after_s = round(time.monotonic() - start, 3)
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("nonce") != request.nonce:
                continue
            if message.get("type") == "result":
                if outcome.record is None:
                    outcome.record = parse_record(request.mode, message)
                return
            if message.get("type") == "reference":
                deadline.reference(message, outcome)
                continue
            if message.get("type") == "turn":
                deadline.turn(message, outcome)
            if message.get("type") == "stage":
                outcome.last_stage = str(message.get("stage", ""))
                if outcome.last_stage == "verify":
                    deadline.arm(outcome)
            outcome.events.append(message)
            if on_event is not None:
                on_event(message)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
