"""Listen: the HTTP service on a socket, its scheduler running, until SIGINT or SIGTERM.

``listen`` binds the socket first, before any worker starts (so ``--http HOST:0`` knows its
port and says it before serving, and a port in use is one line, exit 2); ``run`` starts the
scheduler (which first queues again what a stopped service left running), serves with
uvicorn, and on a signal stops taking requests, lets the requests in progress answer, and
stops the scheduler. Jobs still queued or running stay in the store: the
next start finishes them.

What it does not do: build the pool (the command line does, as for ``bench run``).
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable
from pathlib import Path

import uvicorn

from cuda_agent.cluster.pool import EvalPool
from cuda_agent.core.errors import ConfigError
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.service.app import create_app
from cuda_agent.service.auth import Tokens, check_bind
from cuda_agent.service.scheduler import Scheduler
from cuda_agent.service.store import JobStore


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8000`` for IPv6); ValueError with one line otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--http {text!r}: give HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]"), int(port)


def listen(address: tuple[str, int]) -> socket.socket:
    """A socket bound and listening at ``address``; ConfigError (one line) where that fails,
    e.g. a port another process holds."""
    host, port = address
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(512)
    except OSError as err:
        sock.close()
        reason = err.strerror or str(err)
        raise ConfigError(f"--http {host}:{port}: cannot listen there ({reason})") from None
    return sock


def run(
    pool: EvalPool,
    backend: str,
    isolation: str,
    tokens: Tokens,
    sock: socket.socket,
    db_path: Path,
    base: EvalOptions,
    say: Callable[[str], None] = print,
) -> None:
    """Serve on ``sock`` (from ``listen``) until SIGINT or SIGTERM; closes it."""
    host, bound = sock.getsockname()[:2]
    family = sock.family
    check_bind(host, tokens)
    store = JobStore(db_path)
    devices = len(pool.devices) * max(1, int(getattr(pool, "jobs_per_device", 1)))
    scheduler = Scheduler(store, pool, backend, base, capacity=4 * devices + 4)
    scheduler.start()
    app = create_app(scheduler, tokens, isolation)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=30)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    auth = "bearer token required" if tokens.required else "no token (loopback only)"
    say(
        f"reward service ({backend}, isolation {isolation}) on http://{shown}:{bound} "
        f"({auth}; jobs in {db_path})"
    )
    # uvicorn stops on SIGINT / SIGTERM, then raises the signal again for the handler that was
    # there before: make that one a no-op, so the scheduler, the store and the pool are closed
    # here and the command exits 0 after a requested stop
    previous = {sig: signal.signal(sig, _stopping) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        scheduler.stop()
        store.close()
        sock.close()


def _stopping(_signum: int, _frame: object) -> None:
    """The signal was handled: uvicorn has stopped serving."""
