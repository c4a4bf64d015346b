"""A local evaluation service: warm workers kept ready, so one ``eval`` takes seconds.

A single ``cuda-agent eval`` otherwise pays for a fresh worker (Python, torch, CUDA's context,
dynamo) and the command's own imports on every call. ``cuda-agent serve`` runs this server:
it imports the evaluation code once, probes the toolchain and the isolation, and keeps a
started worker ready per backend (the pipeline's spare workers), replacing each one used.
``eval`` and ``tool verify|profile`` send their evaluation here when the service runs
(``evaluate_remote``), and evaluate in their own process otherwise.

Protocol, on a Unix socket in the harness's secret folder (``core/secret.py``; hidden from
every sandbox): one JSON header line ``{"token", "op"}``, where the token is derived from the
harness's key, so only processes that can read the key (the harness's own commands) are
served; then, for ``evaluate``, one line of base64 pickle ``(problem, solution, options)``.
The server answers with JSON lines: ``{"type": "progress", "stage", "text"}`` while it works
and ``{"type": "result", "data": <base64 pickle of the EvalResult>}`` or ``{"type": "error"}``.
Evaluations on one backend run one at a time (a device is never shared). What it does not do:
schedule many jobs (use ``bench``'s pools for that).
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import json
import logging
import os
import pickle
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent.core import secret
from cuda_agent.core.sockets import SHUTDOWN_POLL_S, read_line
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.prewarm import prewarm

log = logging.getLogger(__name__)

SOCKET_NAME = "eval.sock"
CONNECT_TIMEOUT_S = 2.0
TOKEN_PURPOSE = b"cuda-agent evaluation service"

Progress = Callable[[str, str], None]


SOCKET_ENV = "CUDA_AGENT_SERVICE_SOCKET"  # another place for the socket (tests, several services)


def socket_path() -> Path:
    override = os.environ.get(SOCKET_ENV)
    return Path(override) if override else secret.secret_dir() / SOCKET_NAME


def token() -> str:
    return secret.sign(TOKEN_PURPOSE)


def _encode(obj: object) -> str:
    return base64.b64encode(pickle.dumps(obj)).decode("ascii")


def _decode(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))


# ----------------------------------------------------------------------------- client


def service_info(path: Path | None = None) -> dict[str, Any] | None:
    """The running service's ``{"backend", "pid", ...}``, or None when none answers."""
    try:
        with _connect(path) as sock:
            _send(sock, {"token": token(), "op": "info"})
            reply = _read_line(sock)
    except (OSError, ValueError, secret.SecretUnavailable):
        return None
    if reply.get("type") != "info":
        return None
    return reply


def evaluate_remote(
    problem: Problem,
    solution: Solution,
    options: Any,
    progress: Progress | None = None,
    path: Path | None = None,
) -> EvalResult | None:
    """Evaluate through the service; None when no service answers (evaluate locally then)."""
    try:
        sock = _connect(path)
    except (OSError, secret.SecretUnavailable):
        return None
    with sock:
        try:
            _send(sock, {"token": token(), "op": "evaluate"})
            sock.sendall(_encode((problem, solution, options)).encode() + b"\n")
        except OSError:
            return None
        sock.settimeout(None)
        reader = sock.makefile("rb")
        for raw in reader:
            message = json.loads(raw)
            kind = message.get("type")
            if kind == "progress" and progress is not None:
                progress(str(message.get("stage", "")), str(message.get("text", "")))
            elif kind == "result":
                result: EvalResult = _decode(message["data"])
                return result
            elif kind == "error":
                raise ServiceError(str(message.get("message")))
    raise ServiceError("the evaluation service closed the connection without a result")


class ServiceError(RuntimeError):
    """The service answered, but could not evaluate (its message says why)."""


def _connect(path: Path | None) -> socket.socket:
    target = path or socket_path()
    if not target.exists():
        raise FileNotFoundError(str(target))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(target))
    except OSError:
        sock.close()
        raise
    return sock


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def _read_line(sock: socket.socket) -> dict[str, Any]:
    reply = json.loads(read_line(sock))
    if not isinstance(reply, dict):
        raise ValueError("not a JSON object")
    return reply


# ----------------------------------------------------------------------------- server


class EvalService:
    """``with EvalService(backend) as service: service.serve_forever()``."""

    def __init__(self, backend: str, path: Path | None = None, spare_depth: int = 1) -> None:
        self.backend = backend
        self.path = path or socket_path()
        self.spare_depth = spare_depth
        self.served = 0
        self._device_lock = threading.Lock()
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._token = ""
        self._env: dict[str, str] = {}

    def __enter__(self) -> EvalService:
        self.isolation = prewarm(self.backend)  # imports, toolchain, isolation probes
        self._token = token()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if service_info(self.path) is not None:
            raise RuntimeError(f"an evaluation service already listens on {self.path}")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        service = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                service._handle(self.rfile, self.wfile)

        self._server = socketserver.ThreadingUnixStreamServer(str(self.path), Handler)
        self._server.daemon_threads = True
        os.chmod(self.path, 0o600)
        self._warm()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def serve_forever(self) -> None:
        assert self._server is not None
        self._server.serve_forever(poll_interval=SHUTDOWN_POLL_S)

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()

    def _warm(self) -> None:
        """Start the spare worker the next evaluation will take."""
        from cuda_agent.evaluator.launch.worker_spawn import worker_env
        from cuda_agent.evaluator.pipeline import spare_workers

        # the environment every worker of this service gets: fixed at start, so the spares
        # started now match the evaluations that come later (a spare is kept per environment)
        self._env = worker_env()
        spare_workers().prime(self.backend, self._env, True, self.spare_depth)

    def _spares(self) -> dict[str, int]:
        """``{"spares", "spares_ready"}``: started workers kept, and those done warming up
        (an evaluation that takes a ready one does not wait for a worker's start)."""
        from cuda_agent.evaluator.pipeline import spare_workers

        spares = spare_workers()
        return {
            "spares": spares.waiting(self.backend, self._env, True),
            "spares_ready": spares.ready(self.backend, self._env, True),
        }

    def _handle(self, rfile: Any, wfile: Any) -> None:
        def send(message: dict[str, Any]) -> None:
            wfile.write(json.dumps(message).encode() + b"\n")
            wfile.flush()

        try:
            header = json.loads(rfile.readline())
        except ValueError:
            return
        if not isinstance(header, dict) or not hmac.compare_digest(
            str(header.get("token", "")), self._token
        ):
            send({"type": "error", "message": "not authorised"})
            return
        if header.get("op") == "info":
            send(
                {
                    "type": "info",
                    "backend": self.backend,
                    "pid": os.getpid(),
                    "served": self.served,
                    "isolation": self.isolation,
                    **self._spares(),
                }
            )
            return
        if header.get("op") != "evaluate":
            send({"type": "error", "message": f"unknown op {header.get('op')!r}"})
            return
        try:
            problem, solution, options = _decode(rfile.readline().decode("ascii"))
            result = self._evaluate(problem, solution, options, send)
        except Exception as err:  # the caller gets the reason, the service lives on
            log.exception("evaluation failed in the service")
            send({"type": "error", "message": f"{type(err).__name__}: {err}"})
            return
        send({"type": "result", "data": _encode(result)})

    def _evaluate(
        self,
        problem: Problem,
        solution: Solution,
        options: Any,
        send: Callable[[dict[str, Any]], None],
    ) -> EvalResult:
        from cuda_agent.evaluator.pipeline import execute, prepare

        if options.backend != self.backend:
            raise ServiceError(f"this service evaluates on {self.backend}, not {options.backend}")
        opts = replace(options, keep_spare_worker=True, spare_depth=self.spare_depth)

        def progress(stage: str, text: str) -> None:
            send({"type": "progress", "stage": stage, "text": text})

        prepared = prepare(problem, solution, opts, progress)
        with self._device_lock:
            result = execute(prepared, progress, env_extra=self._env)
        self.served += 1
        result.details.service = {"pid": os.getpid(), "served": self.served}
        return result
