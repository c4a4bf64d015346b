"""Start worker processes: a fresh one, one forked from a template, or one in a sandbox.

``spawn_worker`` starts a worker that imports torch (and creates its CUDA context) before its
request arrives; where the worker confines itself (``confine`` mode) or is not confined, it is
forked from a template that has imported torch (``worker_template.py``;
``CUDA_AGENT_WORKER_TEMPLATE=0`` turns that off); a bubblewrapped worker, or one under a prefix
(``ncu``, compute-sanitizer), is started as its own process. A worker under AddressSanitizer
(``asan.py``) is forked from a template of its own, started with the runtime preloaded, under
the same rules. ``worker_sandbox`` is the one policy evaluation
workers run under. Workers are started without ``preexec_fn`` (the child confines itself), so
starting one from a thread of a busy process cannot deadlock; every started worker is
remembered, so that the command's end (or a SIGTERM) can kill them all.

What it does not do: send a request or read a result (``worker_process.py``), or keep spares
(``spare_workers.py``).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import (
    PRIVATE_BUILDS_ENV,
    builds_dir,
    cache_root,
    ensure_dir,
    locks_dir,
    package_root,
    scratch_dir,
)
from cuda_agent.core.secret import SANDBOXED_ENV
from cuda_agent.evaluator.launch.asan import AsanRun
from cuda_agent.evaluator.launch.worker_template import (
    CHILD_RESULT_FD,
    TemplateUnavailable,
    WorkerProcess,
    worker_templates,
)
from cuda_agent.workspace.isolation import NONE
from cuda_agent.workspace.memory_cap import worker_memory_cap_bytes
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy

TEMPLATE_ENV = "CUDA_AGENT_WORKER_TEMPLATE"  # "0": start every worker as its own process


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    src_root = str(package_root().parent)
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
    asan: AsanRun | None = None,
) -> WorkerHandle:
    """Start a worker that imports torch (and, for cuda, creates its context) right away.

    ``sandboxed``: under the strongest isolation available (``worker_sandbox``): only
    ``folder`` writable, no network, the shared build cache read-only; raises
    ``IsolationUnavailable`` when there is none and ``allow_unsandboxed`` is False.
    ``address_space_limit=False`` lifts the cpu worker's address-space limit (AddressSanitizer
    reserves terabytes of shadow address space; it bounds its heap itself). ``asan``: the
    worker runs under AddressSanitizer (forked from a template started under it, or started
    with its runtime preloaded); not with a ``prefix``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if not prefix and os.environ.get(TEMPLATE_ENV, "1") != "0":
        try:
            return _fork_worker(
                backend, env, folder, sandboxed, allow_unsandboxed, address_space_limit, asan
            )
        except TemplateUnavailable as err:
            _note_fallback(str(err))
    if asan is not None:
        if prefix:
            raise ValueError("a worker under AddressSanitizer takes no other prefix")
        prefix, env = asan.prefix(), asan.process_env(env)
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
    key = env_key(backend, env, sandboxed)
    return WorkerHandle(proc, read_fd, write_fd, folder, key, sandbox=sandbox)


_STARTED: weakref.WeakSet[Any] = weakref.WeakSet()
_FALLBACKS: set[str] = set()


def _fork_worker(
    backend: str,
    env: dict[str, str],
    folder: Path,
    sandboxed: bool,
    allow_unsandboxed: bool,
    address_space_limit: bool = True,
    asan: AsanRun | None = None,
) -> WorkerHandle:
    """A worker forked from this environment's template, confined as its sandbox says
    (``TemplateUnavailable`` for a bubblewrapped one: it must be a sandbox of its own).
    Under ``asan``, the template is one started with the runtime and the options every check
    shares; the worker's environment and reports' path are its own."""
    template_env = asan.template_env(env) if asan is not None else env
    own_env = asan.forked_env(env) if asan is not None else env
    sandbox = None
    if sandboxed:
        sandbox = worker_sandbox(backend, own_env, folder, allow_unsandboxed, address_space_limit)
    if sandbox is not None and sandbox.mode == "bwrap":
        raise TemplateUnavailable("bubblewrap starts each worker")
    templates = worker_templates(ensure_dir(scratch_dir()) / "templates")
    template = templates.get(backend, template_env, _template_key(backend, template_env))
    proc, read_fd = template.fork(
        sandbox.environment() if sandbox is not None else own_env,
        folder,
        sandbox.plan.to_json() if sandbox is not None else None,
        folder / "worker.stdout",
        folder / "worker.stderr",
        report_path=str(asan.log) if asan is not None else None,
    )
    _STARTED.add(proc)
    key = env_key(backend, env, sandboxed)
    return WorkerHandle(proc, read_fd, CHILD_RESULT_FD, folder, key, sandbox=sandbox)


# variables a template's imports never read and each worker gets its own value of: the GPU a
# pool pins (CUDA reads it when the worker creates its context, after the fork), pytest's
# per-test marker and xdist's worker name, and our own settings (``CUDA_AGENT_*``: the cache,
# the isolation mode...), which only our Python code reads, at run time, from the environment
# the order gives the worker (the template replaces its whole environment before anything
# runs). Workers that differ only in these share a template. Anything else (``OMP_*``,
# ``LD_*``, ``PYTHON*``, ``ASAN_OPTIONS``...) may be read when a library loads, in the
# template: a new one.
PER_WORKER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER")
OUR_PREFIX = "CUDA_AGENT_"


def _template_key(backend: str, env: dict[str, str]) -> str:
    shared = {
        k: v
        for k, v in env.items()
        if k not in PER_WORKER_VARIABLES and not k.startswith(OUR_PREFIX)
    }
    return env_key(backend, shared, False)


def _note_fallback(reason: str) -> None:
    if reason not in _FALLBACKS and "bubblewrap" not in reason:
        _FALLBACKS.add(reason)
        import logging

        logging.getLogger(__name__).warning("workers start as their own processes: %s", reason)


def kill_all_workers() -> None:
    """Kill every worker this process started that is still running (with its group)."""
    for proc in list(_STARTED):
        if proc.poll() is None:
            kill_group(proc)


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


def poll_ready(handle: WorkerHandle, timeout_s: float) -> None:
    """Read the worker's "ready" line if it has come (waiting at most ``timeout_s``)."""
    if handle.ready:
        return
    ready, _, _ = select.select([handle.read_fd], [], [], timeout_s)
    if ready:
        handle.pending += os.read(handle.read_fd, 65536)
        handle.ready = b"ready\n" in handle.pending


def discard(handle: WorkerHandle) -> None:
    kill_group(handle.proc)
    with contextlib.suppress(Exception):
        handle.proc.wait(timeout=5)
    with contextlib.suppress(OSError):
        os.close(handle.read_fd)
    shutil.rmtree(handle.folder, ignore_errors=True)


def env_key(backend: str, env: dict[str, str], sandboxed: bool) -> str:
    items = "\0".join(f"{k}={v}" for k, v in sorted(env.items()))
    return f"{backend}\0{sandboxed}\0{items}"


def kill_group(proc: WorkerProcess) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
