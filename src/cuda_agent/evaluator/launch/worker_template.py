"""Workers forked from a template process: a worker's start-up paid once, not per evaluation.

``worker_templates()`` keeps one template (``evaluator/worker/template.py``) per backend and
worker environment, started on first use: a connection to the template this cache shares
across commands (``shared_template.py``), or where it cannot be shared, a private child.
``Template.fork`` sends it an order (the worker's folder, environment and confinement plan,
with its stdin, result pipe, stdout and stderr as file descriptors) and returns a
``ForkedWorker``, which the pool treats as it treats a ``subprocess.Popen``: ``pid`` (its own
process group), ``stdin``, ``poll``, ``wait``, ``returncode``. Exit statuses come from the
template, which is the worker's parent.

Used where a worker confines itself (``confine`` mode: user, Landlock, network namespace) or is
not confined (``none``); a bubblewrapped worker is a sandbox of its own and is still started
the ordinary way, as is one run under a prefix (``ncu``, compute-sanitizer). A template started
with AddressSanitizer's runtime preloaded (its environment says so: ``asan.py``) forks the
memory check's workers; an order's ``report_path`` is where that worker's reports go (ASan read
its options when the template started). A template that cannot start, or refuses an order
(a report path where ASan's runtime is not loaded, say), makes the caller fall back to
starting the worker the ordinary way (``TemplateUnavailable``), so isolation never depends
on it.

What it does not do: decide the isolation (``worker_spawn.worker_sandbox`` does) or read
anything from a worker (the pool reads the result pipe as for any worker).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import logging
import os
import socket
import subprocess
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol

from cuda_agent.evaluator.launch.shared_template import (
    connect,
    shared_socket,
    start_template_process,
)

log = logging.getLogger(__name__)

START_TIMEOUT_S = 600.0  # a template's own start: Python and torch, once
ORDER_TIMEOUT_S = 60.0
CHILD_RESULT_FD = 3  # the result pipe's number in a forked worker


class TemplateUnavailable(RuntimeError):
    """No template can fork this worker: start it the ordinary way."""


class WorkerProcess(Protocol):
    """What the pool needs of a worker's process: a ``subprocess.Popen`` or a ``ForkedWorker``."""

    pid: int
    returncode: int | None
    stdin: Any

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class ForkedWorker:
    """A worker forked by a template, with the parts of ``subprocess.Popen`` the pool uses."""

    def __init__(self, pid: int, stdin: Any, template: Template) -> None:
        self.pid = pid
        self.stdin = stdin
        self.returncode: int | None = None
        self._template = template
        self._done = threading.Event()

    def _exited(self, status: int) -> None:
        self.returncode = status
        self._done.set()

    def poll(self) -> int | None:
        if not self._done.is_set() and not self._template.alive():
            self._exited(-9)  # the template is gone, and killed its workers with it
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0.0)
            self._done.wait(left)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, 9)


class Template:
    """One template process and the orders sent to it (thread-safe)."""

    def __init__(
        self, backend: str, env: dict[str, str], log_path: Path, shared: Path | None = None
    ) -> None:
        """Start a private template (a child of this process), or with ``shared`` connect to
        the shared one listening there, started now if none is (``shared_template.py``;
        ``OSError`` where neither works)."""
        self.backend = backend
        self._proc: subprocess.Popen[bytes] | None = None
        if shared is not None:
            self._ctl = connect(shared, env, log_path)
        else:
            parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            self._proc = start_template_process(
                [f"--control-fd={child_end.fileno()}"],
                child_end.fileno(),
                env,
                log_path,
                cwd=log_path.parent,
            )
            child_end.close()
            self._ctl = parent_end
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[dict[str, Any]]] = {}
        self._workers: dict[int, ForkedWorker] = {}
        self._early: dict[int, int] = {}  # exits reported before the fork's reply was read
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ready: Future[dict[str, Any]] = Future()
        self._reader = threading.Thread(target=self._read, daemon=True, name="worker-template")
        self._reader.start()

    @property
    def shared(self) -> bool:
        """Whether this is a connection to a shared template (not a child of this process)."""
        return self._proc is None

    @property
    def pid(self) -> int:
        """The template's process id: the parent of every worker it forks."""
        if self._proc is not None:
            return self._proc.pid
        return int(self.wait_ready()["pid"])

    def alive(self) -> bool:
        return (self._proc is None or self._proc.poll() is None) and self._reader.is_alive()

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """The template's greeting, once it is ready (``TemplateUnavailable``: it never was)."""
        try:
            hello = self._ready.result(timeout=timeout_s)
        except Exception as err:
            raise TemplateUnavailable(f"the worker template did not start: {err}") from None
        if not hello.get("ready"):
            raise TemplateUnavailable(f"the worker template refused: {hello.get('error')}")
        return hello

    def fork(
        self,
        env: dict[str, str],
        cwd: Path,
        plan_json: str | None,
        stdout_path: Path,
        stderr_path: Path,
        report_path: str | None = None,
    ) -> tuple[ForkedWorker, int]:
        """Fork one worker; (the worker, the read end of its result pipe). ``report_path``:
        where the worker's AddressSanitizer reports go (the template must run under ASan)."""
        hello = self.wait_ready()
        if report_path is not None and not hello.get("asan"):
            raise TemplateUnavailable("the worker template does not run under AddressSanitizer")
        stdin_read, stdin_write = os.pipe()
        result_read, result_write = os.pipe()
        out = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        order_id = next(self._ids)
        reply: Future[dict[str, Any]] = Future()
        with self._lock:
            self._pending[order_id] = reply
        order = {
            "id": order_id,
            "backend": self.backend,
            "env": env,
            "cwd": str(cwd),
            "plan": plan_json,
            "result_fd": CHILD_RESULT_FD,
            "report_path": report_path,
        }
        try:
            with self._send_lock:
                socket.send_fds(
                    self._ctl, [json.dumps(order).encode()], [stdin_read, result_write, out, err]
                )
            answer = reply.result(timeout=ORDER_TIMEOUT_S)
        except Exception as error:
            for fd in (stdin_write, result_read):
                os.close(fd)
            raise TemplateUnavailable(f"the worker template did not fork: {error}") from None
        finally:
            for fd in (stdin_read, result_write, out, err):
                os.close(fd)
            with self._lock:
                self._pending.pop(order_id, None)
        if "pid" not in answer:
            os.close(stdin_write)
            os.close(result_read)
            raise TemplateUnavailable(f"the worker template refused: {answer.get('error')}")
        pid = int(answer["pid"])
        worker = ForkedWorker(pid, os.fdopen(stdin_write, "wb"), self)
        with self._lock:
            self._workers[pid] = worker
            if pid in self._early:
                worker._exited(self._early.pop(pid))
        return worker, result_read

    def close(self) -> None:
        """Stop the template (a shared one: leave it), which kills the workers forked for this
        process as it goes."""
        with contextlib.suppress(OSError):
            self._ctl.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._ctl.close()
        if self._proc is None:
            self._reader.join(timeout=30)
            return
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, 9)
            self._proc.wait()

    def _read(self) -> None:
        try:
            while True:
                data = self._ctl.recv(1 << 16)
                if not data:
                    break
                self._dispatch(json.loads(data))
        except (OSError, ValueError) as err:
            log.debug("worker template channel closed: %s", err)
        finally:
            if not self._ready.done():
                self._ready.set_exception(RuntimeError("the template exited"))
            with self._lock:
                for pending in self._pending.values():
                    if not pending.done():
                        pending.set_exception(RuntimeError("the template exited"))
                for worker in self._workers.values():
                    if worker.returncode is None:
                        worker._exited(-9)

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "ready" in message:
            self._ready.set_result(message)
        elif "exit" in message:
            pid, status = int(message["exit"]), int(message["status"])
            with self._lock:
                worker = self._workers.pop(pid, None)
                if worker is None:
                    self._early[pid] = status
            if worker is not None:
                worker._exited(status)
        else:
            with self._lock:
                pending = self._pending.get(int(message.get("id") or 0))
            if pending is not None and not pending.done():
                pending.set_result(message)


class Templates:
    """One template per (backend, environment), started on first use; ``max_templates`` kept
    (the least recently used one is stopped)."""

    def __init__(self, root: Path, max_templates: int = 8) -> None:
        self.root = root
        self.max_templates = max_templates
        self._templates: dict[str, Template] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, backend: str, env: dict[str, str], key: str) -> Template:
        with self._lock:
            template = self._templates.pop(key, None)
            if template is not None and not template.alive():
                template.close()
                template = None
            if template is None:
                template = self._start(backend, env, key)
            self._templates[key] = template
            while len(self._templates) > self.max_templates:
                self._templates.pop(next(iter(self._templates))).close()
        return template

    def _start(self, backend: str, env: dict[str, str], key: str) -> Template:
        """The shared template for ``key`` where it can be shared, else a private one."""
        path = shared_socket(key)
        if path is not None:
            try:
                return Template(backend, env, path.with_suffix(".log"), shared=path)
            except Exception as err:  # a private template does the same work
                log.warning("no shared worker template (%s): starting a private one", err)
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return Template(backend, env, self.root / f"template-{digest}" / "log")

    def close(self) -> None:
        with self._lock:
            templates = list(self._templates.values())
            self._templates.clear()
        for template in templates:
            template.close()


_TEMPLATES: Templates | None = None
_TEMPLATES_LOCK = threading.Lock()


def worker_templates(root: Path) -> Templates:
    """The process-wide templates (folders under ``root``)."""
    global _TEMPLATES
    with _TEMPLATES_LOCK:
        if _TEMPLATES is None:
            _TEMPLATES = Templates(root)
        return _TEMPLATES
