"""A persistent bash session inside the sandbox (the ``bash`` tool's backend).

Commands run one at a time in the same shell, so the working directory and exported variables
carry over. Each command's stdin is ``/dev/null`` and its stderr is merged into stdout. The end
of a command is found by a per-command random marker that carries the exit status. A command
that runs past its timeout takes the whole session down (the process group is killed) and the
next command starts a fresh shell; the caller is told so.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import signal
import subprocess
import time
from dataclasses import dataclass

from cuda_agent.workspace.sandbox import Sandbox

MAX_CAPTURE = 4 << 20  # bytes of output kept per command (the rest is dropped in the middle)


@dataclass
class CommandResult:
    output: str
    exit_code: int | None
    timed_out: bool = False
    restarted: bool = False
    seconds: float = 0.0


class PersistentShell:
    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._proc: subprocess.Popen[bytes] | None = None
        self._lost = False  # the previous session was killed: tell the caller once

    def run(self, command: str, timeout_s: float) -> CommandResult:
        restarted = self._lost or (self._proc is not None and self._proc.poll() is not None)
        self._lost = False
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc is not None and self._proc.stdin is not None
        marker = f"__CA_DONE_{secrets.token_hex(8)}__"
        script = f"{{ {command}\n}} </dev/null 2>&1\nprintf '\\n{marker} %d\\n' $?\n"
        start = time.monotonic()
        try:
            self._proc.stdin.write(script.encode("utf-8", "replace"))
            self._proc.stdin.flush()
        except BrokenPipeError:
            self.close()
            return CommandResult("the shell exited; a new one will start", None, restarted=True)
        output, code, timed_out = self._read_until(marker, start + timeout_s)
        if timed_out or code is None:  # killed at the deadline, or the shell itself exited
            self.close()
            self._lost = True
        return CommandResult(output, code, timed_out, restarted, time.monotonic() - start)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=5)

    def _start(self) -> None:
        self._proc = self.sandbox.popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )

    def _read_until(self, marker: str, deadline: float) -> tuple[str, int | None, bool]:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        capture = _Capture()
        needle = marker.encode()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return capture.text(), None, True
            ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
            if not ready:
                if self._proc.poll() is not None:
                    return capture.text(), None, False
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return capture.text(), None, False
            capture.add(chunk)
            index = capture.tail.find(needle)
            if index >= 0:
                rest = capture.tail[index + len(needle) :]
                while b"\n" not in rest and time.monotonic() < deadline:
                    more = os.read(fd, 64)
                    if not more:
                        break
                    rest += more
                code = int(rest.split(b"\n", 1)[0].strip() or b"-1")
                capture.tail = capture.tail[:index]
                if capture.tail.endswith(b"\n"):
                    capture.tail = capture.tail[:-1]
                return capture.text(), code, False


class _Capture:
    """Keeps the first quarter and the last half of ``MAX_CAPTURE`` bytes of a stream."""

    def __init__(self) -> None:
        self.head: bytes | None = None
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.tail += chunk
        if len(self.tail) <= MAX_CAPTURE:
            return
        if self.head is None:
            self.head = bytes(self.tail[: MAX_CAPTURE // 4])
            del self.tail[: MAX_CAPTURE // 4]
        excess = len(self.tail) - MAX_CAPTURE // 2
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.tail.decode("utf-8", "replace")
        if self.head is None:
            return body
        note = f"\n[... {self.dropped} bytes of output dropped ...]\n"
        return self.head.decode("utf-8", "replace") + note + body
