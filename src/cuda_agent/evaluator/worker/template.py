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

What it does not do: bubblewrap (each bubblewrapped worker is a sandbox of its own, started by
the parent), or anything a worker does once it has its request (``__main__.serve``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import tempfile
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


def _reap(children: set[int], ctl: socket.socket) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(ctl, {"exit": pid, "status": _exit_code(status)})


def _child(
    order: dict[str, Any], fds: list[int], ctl: socket.socket, wakeup: int, session: int
) -> None:
    """The forked worker: becomes what ``python -m cuda_agent.evaluator.worker`` would be
    after its imports, confined, then serves its one request. Never returns. ``session`` is
    written once the child leads its own session: only then may anyone kill it by group."""
    try:
        ctl.close()
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


def serve_orders(ctl: socket.socket, cuda_ok: bool = True, asan: bool = False) -> None:
    """Fork a worker per order until the control socket closes; report their exits.
    ``cuda_ok``: whether forked children can start CUDA (``cuda_forks_work``); ``asan``:
    whether AddressSanitizer's runtime is loaded here (orders with a report path need it)."""
    children: set[int] = set()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the select below
    try:
        while True:
            ready, _, _ = select.select([ctl.fileno(), wake_read], [], [])
            if wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
                _reap(children, ctl)
            if ctl.fileno() not in ready:
                continue
            data, fds, _flags, _addr = socket.recv_fds(ctl, MAX_ORDER_BYTES, FDS_PER_ORDER)
            if not data:
                return  # the parent is gone
            order = json.loads(data)
            reply = {"id": order.get("id")}
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
                    _child(order, fds, ctl, wake_read, session_write)
                os.close(session_write)
                os.read(session_read, 1)  # the child leads its own group now (or is dead)
                os.close(session_read)
                children.add(pid)
                reply["pid"] = pid
            for fd in fds:
                os.close(fd)
            _send(ctl, reply)
            _reap(children, ctl)
    finally:
        for pid in children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)


def main(argv: list[str]) -> int:
    option = next((a for a in argv if a.startswith("--control-fd=")), None)
    if option is None:
        sys.stderr.write("usage: python -m cuda_agent.evaluator.worker.template --control-fd=N\n")
        return 2
    ctl = socket.socket(fileno=int(option.split("=", 1)[1]))
    from cuda_agent.core.startup import without_collection

    with without_collection():  # the imports every fork shares, frozen (core/startup.py)
        from cuda_agent.evaluator.worker.__main__ import warm_imports

        warm_imports()
    cuda_ok = cuda_forks_work()
    asan = asan_loaded()
    _send(ctl, {"ready": True, "pid": os.getpid(), "cuda_forks": cuda_ok, "asan": asan})
    serve_orders(ctl, cuda_ok, asan)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
