"""Start a worker process for one request and collect its nonce-tagged record.

The worker gets a fresh session (process group), a hard deadline (the whole group is killed
when it passes), its stdout/stderr sent to files, and a private pipe for JSON lines. Only a line
with the request's nonce and type ``result`` counts; a worker that dies or hangs yields ``record
is None`` with the reason (signal, timeout) and the tail of its stderr. With a device budget
(``evaluator/device_budget.py``), the deadline is shortened once, when the worker reports the
stage ``verify``, to now + the budget for the reference's call time the worker reported before
any candidate code ran (its first ``reference`` line; later ones are ignored); the outcome says
whether the budget's end, not the timeout's, stopped it. A sandboxed worker runs
under the strongest isolation available (``workspace/sandbox.py``); the outcome names it.
Workers are started without ``preexec_fn`` (the child confines itself), so starting one from
a thread of a busy process cannot deadlock. Where the worker confines itself (``confine``
mode) or is not confined, it is forked from a template that has imported torch
(``worker_template.py``; ``CUDA_AGENT_WORKER_TEMPLATE=0`` turns that off); a bubblewrapped
worker, or one under a prefix (``ncu``), is started as its own process.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cuda_agent
from cuda_agent.core.paths import builds_dir, cache_root, ensure_dir, locks_dir, scratch_dir
from cuda_agent.core.secret import SANDBOXED_ENV
from cuda_agent.evaluator.builder.builder import PRIVATE_BUILDS_ENV
from cuda_agent.evaluator.memory_cap import worker_memory_cap_bytes
from cuda_agent.evaluator.process_group import kill_group_and_wait
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.evaluator.worker_template import (
    CHILD_RESULT_FD,
    TemplateUnavailable,
    WorkerProcess,
    worker_templates,
)
from cuda_agent.workspace.isolation import NONE
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy

TAIL_BYTES = 4000
EXIT_GRACE_S = 5.0
TEMPLATE_ENV = "CUDA_AGENT_WORKER_TEMPLATE"  # "0": start every worker as its own process
Budget = Callable[[float | None], float | None]  # reference call s -> budget s (None: none)


@dataclass
class WorkerOutcome:
    record: dict[str, Any] | None
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
    # the device budget: the reference's call time the worker reported (before any candidate
    # code ran), the budget armed at ``verify`` (None: none armed), and whether its end (not
    # the timeout's) stopped the worker
    reference_call_s: float | None = None
    device_budget_s: float | None = None
    over_budget: bool = False

    def death_reason(self) -> str:
        if self.timed_out:
            return "timed out"
        code = self.returncode
        if code is not None and 128 < code <= 128 + 64:  # the sandbox reports 128 + signal
            code = 128 - code
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited (status {code}) without a result"


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    src_root = str(Path(cuda_agent.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env


@dataclass
class WorkerHandle:
    """A started worker process, waiting for its request on stdin."""

    proc: WorkerProcess
    read_fd: int
    child_fd: int
    folder: Path
    key: str
    ready: bool = False
    pending: bytes = b""
    sandbox: Sandbox | None = None

    @property
    def isolation(self) -> str:
        return self.sandbox.isolation if self.sandbox is not None else NONE


def spawn_worker(
    backend: str,
    env: dict[str, str],
    folder: Path,
    prefix: list[str] | None = None,
    sandboxed: bool = False,
    allow_unsandboxed: bool = False,
    address_space_limit: bool = True,
) -> WorkerHandle:
    """Start a worker that imports torch (and, for cuda, creates its context) right away.

    ``sandboxed``: under the strongest isolation available (``worker_sandbox``): only
    ``folder`` writable, no network, the shared build cache read-only; raises
    ``IsolationUnavailable`` when there is none and ``allow_unsandboxed`` is False.
    ``address_space_limit=False`` lifts the cpu worker's address-space limit (AddressSanitizer
    reserves terabytes of shadow address space; it bounds its heap itself).
    """
    folder.mkdir(parents=True, exist_ok=True)
    if not prefix and os.environ.get(TEMPLATE_ENV, "1") != "0":
        try:
            return _fork_worker(backend, env, folder, sandboxed, allow_unsandboxed)
        except TemplateUnavailable as err:
            _note_fallback(str(err))
    read_fd, write_fd = os.pipe()
    argv = [
        *(prefix or []),
        sys.executable,
        "-m",
        "cuda_agent.evaluator.worker",
        f"--backend={backend}",
        f"--ready-fd={write_fd}",
    ]
    with (
        open(folder / "worker.stdout", "wb") as out_file,
        open(folder / "worker.stderr", "wb") as err_file,
    ):
        common: dict[str, Any] = dict(
            stdin=subprocess.PIPE, stdout=out_file, stderr=err_file, pass_fds=(write_fd,)
        )
        sandbox = None
        if sandboxed:
            try:
                sandbox = worker_sandbox(
                    backend, env, folder, allow_unsandboxed, address_space_limit
                )
                proc = sandbox.popen(argv, **common)
            except BaseException:
                os.close(read_fd)
                os.close(write_fd)
                raise
        else:
            proc = subprocess.Popen(argv, start_new_session=True, cwd=folder, env=env, **common)
    os.close(write_fd)
    _STARTED.add(proc)
    key = _env_key(backend, env, sandboxed)
    return WorkerHandle(proc, read_fd, write_fd, folder, key, sandbox=sandbox)


_STARTED: weakref.WeakSet[Any] = weakref.WeakSet()
_FALLBACKS: set[str] = set()


def _fork_worker(
    backend: str, env: dict[str, str], folder: Path, sandboxed: bool, allow_unsandboxed: bool
) -> WorkerHandle:
    """A worker forked from this environment's template, confined as its sandbox says
    (``TemplateUnavailable`` for a bubblewrapped one: it must be a sandbox of its own)."""
    sandbox = worker_sandbox(backend, env, folder, allow_unsandboxed) if sandboxed else None
    if sandbox is not None and sandbox.mode == "bwrap":
        raise TemplateUnavailable("bubblewrap starts each worker")
    templates = worker_templates(ensure_dir(scratch_dir()) / "templates")
    template = templates.get(backend, env, _template_key(backend, env))
    proc, read_fd = template.fork(
        sandbox.environment() if sandbox is not None else env,
        folder,
        sandbox.plan.to_json() if sandbox is not None else None,
        folder / "worker.stdout",
        folder / "worker.stderr",
    )
    _STARTED.add(proc)
    key = _env_key(backend, env, sandboxed)
    return WorkerHandle(proc, read_fd, CHILD_RESULT_FD, folder, key, sandbox=sandbox)


# variables a template's imports never read and each worker gets its own value of: the GPU a
# pool pins (CUDA reads it when the worker creates its context, after the fork) and pytest's
# per-test marker. Workers that differ only in these share a template.
PER_WORKER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "PYTEST_CURRENT_TEST")


def _template_key(backend: str, env: dict[str, str]) -> str:
    shared = {k: v for k, v in env.items() if k not in PER_WORKER_VARIABLES}
    return _env_key(backend, shared, False)


def _note_fallback(reason: str) -> None:
    if reason not in _FALLBACKS and "bubblewrap" not in reason:
        _FALLBACKS.add(reason)
        import logging

        logging.getLogger(__name__).warning("workers start as their own processes: %s", reason)


def kill_all_workers() -> None:
    """Kill every worker this process started that is still running (with its group)."""
    for proc in list(_STARTED):
        if proc.poll() is None:
            _kill_group(proc)


def kill_workers_on_termination() -> None:
    """On SIGTERM / SIGHUP, kill our workers first, then die of the signal as usual.

    Workers run in their own sessions (so a deadline can kill a whole group), which also
    means that killing the command alone would leave them running, holding the GPU.
    """

    def handler(signum: int, _frame: object) -> None:
        kill_all_workers()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for signum in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError):  # not the main thread: leave it
            signal.signal(signum, handler)


def worker_sandbox(
    backend: str,
    env: dict[str, str],
    folder: Path,
    allow_unsandboxed: bool = False,
    address_space_limit: bool = True,
) -> Sandbox:
    """The evaluation worker's sandbox: candidate code can write only its own folder (as a
    dedicated user when the harness runs as root), cannot read the harness's secret and has
    no network."""
    private = folder / "private"
    (private / "builds").mkdir(parents=True, exist_ok=True)
    extra = {
        SANDBOXED_ENV: "1",
        "HOME": str(private),
        "XDG_CACHE_HOME": str(private / "cache"),
        "TRITON_CACHE_DIR": str(private / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(private / "inductor"),
        PRIVATE_BUILDS_ENV: str(private / "builds"),
        "CUDA_AGENT_CACHE": str(cache_root()),  # HOME moves: name the shared cache explicitly
    }
    policy = SandboxPolicy(
        workdir=folder,
        tmpdir=private / "tmp",
        network=False,
        cpu_seconds=4 * 3600,
        address_space_bytes=worker_memory_cap_bytes(backend) if address_space_limit else None,
        file_size_bytes=4 << 30,
        open_files=8192,
        bind_ro=(builds_dir(), ensure_dir(locks_dir())),
        gpu=backend == "cuda",
        inherit_env=True,
        extra_env={**env, **extra},
        drop_user=True,
    )
    return Sandbox(policy, allow_unsandboxed=allow_unsandboxed)


class SpareWorkers:
    """Keeps started workers per (backend, environment) so the next evaluation need not wait
    for Python, torch and CUDA to start. Isolation is unchanged: every evaluation still gets
    a fresh process; only its start-up moves off the critical path.

    ``depth`` spares are kept per environment: one hides the start-up when an evaluation takes
    longer than a worker's start (seconds); a stream of short evaluations (a sweep of
    reference solutions) needs several, started in a staggered way. At most ``max_envs``
    environments keep spares (the least recently used one's are stopped): a long-lived
    process that evaluates under many environments does not pile up idle workers.
    Thread-safe. Spares are started from one thread that lives as long as this object:
    bubblewrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) kills a child when the *thread*
    that started it ends, so a spare started by a short-lived thread (a service request)
    would be killed under the next evaluation.
    """

    def __init__(self, root: Path, max_envs: int = 4) -> None:
        self.root = root
        self.max_envs = max_envs
        self._spares: dict[str, list[WorkerHandle]] = {}  # insertion order = recency
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spare-spawner")
        atexit.register(self.close)

    def _spawn(
        self, backend: str, env: dict[str, str], sandboxed: bool, allow_unsandboxed: bool
    ) -> WorkerHandle:
        job = self._spawner.submit(
            spawn_worker,
            backend,
            env,
            self._folder(),
            sandboxed=sandboxed,
            allow_unsandboxed=allow_unsandboxed,
        )
        return job.result()

    def take(
        self,
        backend: str,
        env: dict[str, str],
        sandboxed: bool = False,
        depth: int = 1,
        allow_unsandboxed: bool = False,
    ) -> WorkerHandle:
        key = _env_key(backend, env, sandboxed)
        start = functools.partial(self._spawn, backend, env, sandboxed, allow_unsandboxed)
        with self._lock:
            queue = self._queue(key)
            for handle in [h for h in queue if h.proc.poll() is not None]:
                queue.remove(handle)
                _discard(handle)
            for handle in queue:
                _poll_ready(handle, 0.0)
            chosen = next((h for h in queue if h.ready), queue[0] if queue else None)
            if chosen is None:
                chosen = start()
            else:
                queue.remove(chosen)
            while len(queue) < max(1, depth):
                queue.append(start())
        return chosen

    def prime(
        self,
        backend: str,
        env: dict[str, str],
        sandboxed: bool = False,
        depth: int = 1,
        allow_unsandboxed: bool = False,
    ) -> None:
        """Start spares for this environment (up to ``depth``) without taking one."""
        with self._lock:
            queue = self._queue(_env_key(backend, env, sandboxed))
            while len(queue) < max(1, depth):
                queue.append(self._spawn(backend, env, sandboxed, allow_unsandboxed))

    def waiting(self, backend: str, env: dict[str, str], sandboxed: bool = False) -> int:
        """How many started spares wait for an evaluation in this environment."""
        with self._lock:
            return len(self._spares.get(_env_key(backend, env, sandboxed), []))

    def ready(self, backend: str, env: dict[str, str], sandboxed: bool = False) -> int:
        """How many of this environment's spares have finished their warm start."""
        with self._lock:
            queue = self._spares.get(_env_key(backend, env, sandboxed), [])
            for handle in queue:
                if handle.proc.poll() is None:
                    _poll_ready(handle, 0.0)
            return sum(1 for h in queue if h.ready and h.proc.poll() is None)

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until every spare has finished its warm start (True) or the timeout passes."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            handles = [h for queue in self._spares.values() for h in queue]
        for handle in handles:
            while not handle.ready:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or handle.proc.poll() is not None:
                    return False
                _poll_ready(handle, min(remaining, 1.0))
        return True

    def close(self) -> None:
        with self._lock:
            for queue in self._spares.values():
                for handle in queue:
                    _discard(handle)
            self._spares.clear()

    def _queue(self, key: str) -> list[WorkerHandle]:
        """This environment's spares, now the most recently used; evicts the oldest env's."""
        queue = self._spares.pop(key, [])
        self._spares[key] = queue
        while len(self._spares) > max(1, self.max_envs):
            oldest = next(iter(self._spares))
            for handle in self._spares.pop(oldest):
                _discard(handle)
        return queue

    def _folder(self) -> Path:
        return self.root / f"worker-{secrets.token_hex(6)}"


def _poll_ready(handle: WorkerHandle, timeout_s: float) -> None:
    """Read the worker's "ready" line if it has come (waiting at most ``timeout_s``)."""
    if handle.ready:
        return
    ready, _, _ = select.select([handle.read_fd], [], [], timeout_s)
    if ready:
        handle.pending += os.read(handle.read_fd, 65536)
        handle.ready = b"ready\n" in handle.pending


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
) -> WorkerOutcome:
    """Send ``request`` to a fresh worker (a spare one if given) and collect its record.

    ``files`` (relative path -> text) are written to the worker's own folder first and become
    the request's ``solution_root``: the only place a sandboxed worker can write.
    ``budget(reference_call_s)``: the device budget in seconds (None: none), asked when the
    worker reports ``verify`` (see the module docstring).
    """
    env = env or worker_env()
    if spares is not None and not prefix:
        handle = spares.take(
            request.settings.backend, env, sandboxed, spare_depth, allow_unsandboxed
        )
    else:
        handle = spawn_worker(
            request.settings.backend,
            env,
            scratch,
            prefix,
            sandboxed,
            allow_unsandboxed,
            address_space_limit,
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
        source="spare" if spares is not None and not prefix else "fresh",
        ready_after_s=0.0 if handle.ready else None,
    )
    try:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write((request.to_json() + "\n").encode("utf-8"))
            proc.stdin.close()
        deadline = Deadline(start + timeout_s, budget)
        _read_records(handle.read_fd, request.nonce, start, deadline, outcome, on_event)
    finally:
        os.close(handle.read_fd)
        if outcome.timed_out:
            _kill_group(proc)
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
            _kill_group(proc)
            outcome.returncode = proc.wait()
        # nothing the candidate left behind survives the evaluation, not even for a moment
        kill_group_and_wait(proc.pid)
    outcome.seconds = time.monotonic() - start
    outcome.stdout_tail = _tail(handle.folder / "worker.stdout")
    outcome.stderr_tail = _tail(handle.folder / "worker.stderr")
    if spares is not None:
        shutil.rmtree(handle.folder, ignore_errors=True)
    return outcome


def _discard(handle: WorkerHandle) -> None:
    _kill_group(handle.proc)
    with contextlib.suppress(Exception):
        handle.proc.wait(timeout=5)
    with contextlib.suppress(OSError):
        os.close(handle.read_fd)
    shutil.rmtree(handle.folder, ignore_errors=True)


def _env_key(backend: str, env: dict[str, str], sandboxed: bool) -> str:
    items = "\0".join(f"{k}={v}" for k, v in sorted(env.items()))
    return f"{backend}\0{sandboxed}\0{items}"


@dataclass
class Deadline:
    """A worker's deadline: the timeout's, shortened once (at ``verify``) by the budget."""

    timeout_at: float
    budget: Budget | None = None
    budget_at: float | None = None
    reference_seen: bool = False
    armed: bool = False

    @property
    def at(self) -> float:
        return self.timeout_at if self.budget_at is None else min(self.timeout_at, self.budget_at)

    @property
    def budget_ends_first(self) -> bool:
        return self.budget_at is not None and self.budget_at < self.timeout_at

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
    nonce: str,
    start: float,
    deadline: Deadline,
    outcome: WorkerOutcome,
    on_event: Callable[[dict[str, Any]], None] | None,
) -> None:
    buffer = b""
    while True:
        remaining = deadline.at - time.monotonic()
        if remaining <= 0:
            outcome.timed_out = True
            outcome.over_budget = deadline.budget_ends_first
            return
        ready, _, _ = select.select([fd], [], [], min(remaining, 1.0))
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
            if not isinstance(message, dict) or message.get("nonce") != nonce:
                continue
            if message.get("type") == "result":
                if outcome.record is None:
                    outcome.record = message
                return
            if message.get("type") == "reference":
                deadline.reference(message, outcome)
                continue
            if message.get("type") == "stage":
                outcome.last_stage = str(message.get("stage", ""))
                if outcome.last_stage == "verify":
                    deadline.arm(outcome)
            outcome.events.append(message)
            if on_event is not None:
                on_event(message)


def _kill_group(proc: WorkerProcess) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
