"""The worker template: a process that has imported torch and the harness, and forks workers.

``python -m cuda_agent.evaluator.worker.template --control-fd=N`` pays a worker's fixed start-up
once (Python, torch, dynamo, the evaluation code: seconds), then waits on its control socket.
Each order from the parent (``evaluator/launch/worker_template.py``) forks one worker. The child, in
order: takes its own session, its stdin / stdout / stderr and result pipe (passed with the
order), its folder and environment (exactly what an executed worker would get), confines
itself with the order's plan (``workspace.confine.apply``: rlimits, network namespace,
Landlock, seccomp, the sandbox user), and only then creates its CUDA context and reads the
request: candidate code never runs before the confinement, and never in the template. Each
worker still serves exactly one request and exits.

A template started with AddressSanitizer's runtime preloaded (the memory check's,
``evaluator/launch/asan.py``) says so when it is ready (``asan``), and its orders carry a
``report_path``: ASan read ``ASAN_OPTIONS`` (halt-on-error, the heap limit) when the template
started, so the child, once confined, points its reports there itself
(``__sanitizer_set_report_path``; ASan appends ``.<pid>``) before it reads its request. A
template without the runtime refuses such orders.

The template never creates a CUDA context and never reads candidate code or the harness's
secret. A CUDA driver initialised in the template would be shared broken by every fork, and
torch's CUDA build maps the driver library on some images without initialising it; so where
the library is mapped, the template forks one probe child that creates a CUDA context and
exits, and takes cuda orders only if the probe succeeded (``cuda_forks_work``). Otherwise it
refuses cuda orders, and the parent then starts those workers the ordinary way. It reports
every child's exit status (the parent is not the child's parent), and when its control socket
closes (the parent is gone) it kills its children's process groups and exits.

A shared template (``--listen-fd``, started by ``evaluator/launch/shared_template.py``) does
the same for every command of a cache: it reads its token on stdin, leaves its starter (a
fork; the starter exits), and serves each connection that shows the token as it would serve
its one parent, until it has been idle for ``--idle-s`` seconds (``Listening``). A
connection's workers are killed when that connection closes.

What it does not do: bubblewrap (each bubblewrapped worker is a sandbox of its own, started by
the parent), or anything a worker does once it has its request (``__main__.serve``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hmac
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from typing import Any

MAX_ORDER_BYTES = 1 << 22
FDS_PER_ORDER = 4  # stdin (read end), the result pipe (write end), stdout, stderr


def cuda_driver_loaded() -> bool:
    """Whether the CUDA driver library is mapped into this process (then forks must not use
    CUDA: a forked child cannot initialise it again)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("libcuda.so" in line for line in maps)
    except OSError:
        return True  # cannot tell: refuse


def cuda_forks_work() -> bool:
    """Whether a child forked from this process can start CUDA: true where the driver library
    is not mapped; where it is, a probe child is forked that creates a context and reports.
    The probe's context dies with it; this process never calls into CUDA."""
    if not cuda_driver_loaded():
        return True
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            import torch

            if torch.cuda.is_available():
                torch.empty(1, device="cuda")
                torch.cuda.synchronize()
                code = 0
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def asan_loaded() -> bool:
    """Whether AddressSanitizer's runtime is loaded here (its report-path call resolves)."""
    return hasattr(ctypes.CDLL(None), "__sanitizer_set_report_path")


def set_asan_report_path(path: str) -> None:
    """Send this process's AddressSanitizer reports to ``path.<pid>`` from now on."""
    ctypes.CDLL(None).__sanitizer_set_report_path(os.fsencode(path))


def _send(ctl: socket.socket, message: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        ctl.send(json.dumps(message).encode())


def _exit_code(status: int) -> int:
    """As ``subprocess`` reports it: the exit code, or minus the signal."""
    return os.waitstatus_to_exitcode(status)


def _reap(owners: dict[int, socket.socket]) -> None:
    """Collect the children that exited and tell the connection that ordered each."""
    while owners:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            owners.clear()
            return
        if pid == 0:
            return
        owner = owners.pop(pid, None)
        if owner is not None:
            _send(owner, {"exit": pid, "status": _exit_code(status)})


def _kill_groups(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def _child(
    order: dict[str, Any],
    fds: list[int],
    sockets: list[socket.socket],
    wakeup: int,
    session: int,
) -> None:
    """The forked worker: becomes what ``python -m cuda_agent.evaluator.worker`` would be
    after its imports, confined, then serves its one request. Never returns. ``session`` is
    written once the child leads its own session: only then may anyone kill it by group."""
    try:
        for sock in sockets:  # the template's own: closed as objects, not just as fds
            sock.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.close(wakeup)
        os.setsid()
        os.write(session, b"s")
        os.close(session)
        stdin, result, out, err = fds
        os.dup2(stdin, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        target = int(order["result_fd"])
        if result != target:
            os.dup2(result, target)
        os.set_inheritable(target, False)
        os.closerange(3, target)
        os.closerange(target + 1, os.sysconf("SC_OPEN_MAX"))
        os.chdir(order["cwd"])
        os.environ.clear()
        os.environ.update(order["env"])
        tempfile.tempdir = None  # found again from the new TMPDIR
        sys.argv = [sys.argv[0], f"--backend={order['backend']}", f"--ready-fd={target}"]
        if order.get("plan"):
            from cuda_agent.workspace.confine import LANDLOCKED_ENV, ConfinePlan, apply

            applied = apply(ConfinePlan.from_json(order["plan"]))
            if "landlock" in applied:
                os.environ[LANDLOCKED_ENV] = "1"  # as the launcher sets it
        if order.get("report_path"):
            set_asan_report_path(str(order["report_path"]))
        from cuda_agent.evaluator.worker.__main__ import announce_ready, serve, warm_device

        warm_device(order["backend"])
        announce_ready(target)
        serve()
    except BaseException:
        with contextlib.suppress(Exception):
            os.write(2, f"cuda-agent worker template: {traceback.format_exc()}".encode())
        os._exit(126)
    os._exit(0)


class Listening:
    """A shared template's listening socket (``--listen-fd``): who may connect, and when to
    stop. A connection's first message must carry ``token`` (the harness derives it from its
    secret key; a sandboxed process cannot); the template exits once it has had no connection
    and no child for ``idle_s`` seconds, or when its socket's path no longer names it (the
    cache was cleared), under the lock the clients take to connect (``lock_path``), so a client
    that connected just then is served, not dropped."""

    def __init__(self, sock: socket.socket, token: str, idle_s: float, lock_path: str) -> None:
        self.sock = sock
        self.token = token
        self.idle_s = idle_s
        self.lock_path = lock_path
        self.path = str(sock.getsockname())
        self.inode = os.stat(self.path).st_ino

    def accepts(self, data: bytes) -> bool:
        try:
            token = json.loads(data).get("token")
        except (ValueError, AttributeError):
            return False
        return isinstance(token, str) and hmac.compare_digest(token, self.token)

    def moved(self) -> bool:
        try:
            return os.stat(self.path).st_ino != self.inode
        except OSError:
            return True

    def try_close(self) -> bool:
        """Stop listening if no client is connecting: True when closed (the path removed).
        Where the lock file cannot be opened, decides without it."""
        from cuda_agent.core.locks import exclusive_file_lock

        with contextlib.ExitStack() as held:
            with contextlib.suppress(OSError):
                held.enter_context(exclusive_file_lock(self.lock_path))
            ready, _, _ = select.select([self.sock.fileno()], [], [], 0)
            if ready:
                return False  # a client connected meanwhile: serve it
            if not self.moved():
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self.sock.close()
            return True


def serve_orders(
    ctl: socket.socket | None,
    cuda_ok: bool = True,
    asan: bool = False,
    listening: Listening | None = None,
    hello: dict[str, Any] | None = None,
) -> None:
    """Fork a worker per order; report each worker's exit to the connection that ordered it.

    A private template (``ctl``) serves its one parent until that connection closes. A shared
    one (``listening``) accepts connections, greets each that shows the token with ``hello``,
    and serves them until it is idle (``Listening``). When a connection closes, the workers it
    ordered are killed, as a private template's are when its parent goes. ``cuda_ok``: whether
    forked children can start CUDA (``cuda_forks_work``); ``asan``: whether AddressSanitizer's
    runtime is loaded here (orders with a report path need it)."""
    owners: dict[int, socket.socket] = {}  # child pid -> the connection that ordered it
    live: dict[int, socket.socket] = {} if ctl is None else {ctl.fileno(): ctl}
    trusted: set[int] = set(live)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below
    idle_since = time.monotonic()

    def drop(fd: int) -> None:
        conn = live.pop(fd)
        trusted.discard(fd)
        _kill_groups([pid for pid, owner in owners.items() if owner is conn])
        conn.close()

    try:
        while True:
            watch = [*live, wake_read]
            if listening is not None:
                watch.append(listening.sock.fileno())
            ready, _, _ = select.select(watch, [], [], None if listening is None else 1.0)
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
                _reap(owners)
            if listening is not None:
                if listening.sock.fileno() in ready:
                    with contextlib.suppress(OSError):
                        conn, _ = listening.sock.accept()
                        live[conn.fileno()] = conn
                if live or owners:
                    idle_since = time.monotonic()
                elif (
                    time.monotonic() - idle_since >= listening.idle_s or listening.moved()
                ) and listening.try_close():
                    return
            for fd in [fd for fd in ready if fd in live]:
                conn = live[fd]
                try:
                    data, fds, _flags, _addr = socket.recv_fds(conn, MAX_ORDER_BYTES, FDS_PER_ORDER)
                except OSError:
                    data, fds = b"", []
                if not data:
                    for extra in fds:
                        os.close(extra)
                    drop(fd)
                    if listening is None:
                        return  # the parent is gone
                    continue
                if fd not in trusted:
                    for extra in fds:
                        os.close(extra)
                    if listening is not None and listening.accepts(data):
                        trusted.add(fd)
                        _send(conn, hello or {"ready": True})
                    else:
                        drop(fd)
                    continue
                own = [*live.values()] + ([listening.sock] if listening is not None else [])
                _send(conn, _order(data, fds, own, wake_read, owners, conn, cuda_ok, asan))
                _reap(owners)
    finally:
        _kill_groups(list(owners))


def _order(
    data: bytes,
    fds: list[int],
    own: list[socket.socket],
    wake_read: int,
    owners: dict[int, socket.socket],
    conn: socket.socket,
    cuda_ok: bool,
    asan: bool,
) -> dict[str, Any]:
    """Carry out one order (fork a worker) and return the reply; the order's fds are closed."""
    order = json.loads(data)
    reply: dict[str, Any] = {"id": order.get("id")}
    if len(fds) != FDS_PER_ORDER:
        reply["error"] = f"an order needs {FDS_PER_ORDER} file descriptors"
    elif order.get("backend") == "cuda" and not cuda_ok:
        reply["error"] = "a child of the template cannot start CUDA"
    elif order.get("report_path") and not asan:
        reply["error"] = "the template does not run under AddressSanitizer"
    else:
        sys.stdout.flush()
        sys.stderr.flush()
        session_read, session_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(session_read)
            _child(order, fds, own, wake_read, session_write)
        os.close(session_write)
        os.read(session_read, 1)  # the child leads its own group now (or is dead)
        os.close(session_read)
        owners[pid] = conn
        reply["pid"] = pid
    for fd in fds:
        os.close(fd)
    return reply


def main(argv: list[str]) -> int:
    options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    listening: Listening | None = None
    ctl: socket.socket | None = None
    if "control-fd" in options:
        ctl = socket.socket(fileno=int(options["control-fd"]))
    elif {"listen-fd", "lock", "idle-s"} <= options.keys():
        # shared (``evaluator/launch/shared_template.py``): the token comes on stdin, then the
        # template leaves its starter (a child of init, not of the command that started it)
        token = sys.stdin.readline().strip()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # sys.stdin stays open: a forked worker reads its request there
        os.close(devnull)
        if os.fork() > 0:
            os._exit(0)
        os.setsid()
        sock = socket.socket(fileno=int(options["listen-fd"]))
        idle_s = float(options["idle-s"])  # its default is the starter's (idle_seconds)
        listening = Listening(sock, token, idle_s, options["lock"])
    else:
        sys.stderr.write(
            "usage: python -m cuda_agent.evaluator.worker.template --control-fd=N\n"
            "   or: ... --listen-fd=N --lock=PATH --idle-s=S (token on stdin)\n"
        )
        return 2
    from cuda_agent.core.startup import without_collection

    with without_collection():  # the imports every fork shares, frozen (core/startup.py)
        from cuda_agent.evaluator.worker.__main__ import warm_imports

        warm_imports()
    cuda_ok = cuda_forks_work()
    asan = asan_loaded()
    hello = {"ready": True, "pid": os.getpid(), "cuda_forks": cuda_ok, "asan": asan}
    if ctl is not None:
        _send(ctl, hello)
    serve_orders(ctl, cuda_ok, asan, listening, {**hello, "shared": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
