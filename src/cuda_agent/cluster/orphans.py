"""Kill the evaluation processes a dead pool actor leaves behind.

An evaluation worker runs in its own session (so that its deadline can kill its whole group),
so when the actor that started it dies (killed, crashed, its job's Ray worker gone) the worker
lives on: it finishes its job on the device beside the retry, or hangs forever. Each actor
marks the environment of every process it starts with its own token (``MARK_ENV``) and starts
one watcher (``python -m cuda_agent.cluster.orphans TOKEN``, in a session of its own) that
holds the read end of a pipe only the actor writes to. When the actor dies, however it dies,
the pipe closes and the watcher kills every process whose environment carries the token.

Only this machine's processes of the same user are seen (``/proc``); Linux only. Ray's own
answer (the raylet as subreaper) makes Ray's workers ignore ``SIGCHLD``, which their children
inherit: exit statuses are lost and bubblewrap hangs, so the pool does not use it.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

MARK_ENV = "CUDA_AGENT_POOL_ACTOR"


def marked(token: str, proc: Path = Path("/proc")) -> list[int]:
    """Process ids whose environment holds ``MARK_ENV=token`` (not this process)."""
    needle = f"{MARK_ENV}={token}".encode()
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def kill_marked(token: str) -> list[int]:
    """SIGKILL every process marked with ``token``, until none is left (at most five sweeps,
    for processes forked meanwhile); returns the ids killed."""
    killed: list[int] = []
    for _ in range(5):
        pids = [p for p in marked(token) if p not in killed]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
            killed.append(pid)
    return killed


class Watcher:
    """Started by an actor: a token for the processes it starts and the watching process."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.cluster.orphans", self.token],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # outlives the actor's process group
        )

    @property
    def env(self) -> dict[str, str]:
        """The environment entry that marks a process as this actor's."""
        return {MARK_ENV: self.token}


def main() -> int:
    token = sys.argv[1]
    while sys.stdin.buffer.read(65536):  # nothing is ever written: this returns at EOF
        pass
    killed = kill_marked(token)
    if killed:
        print(f"killed {len(killed)} orphaned evaluation process(es): {killed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
