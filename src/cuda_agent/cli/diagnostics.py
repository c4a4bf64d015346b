"""Say where a process is stuck: thread stacks on demand and when nothing progresses.

``install_diagnostics`` makes ``kill -USR1 PID`` print every thread's stack to stderr.
``StallWatch`` prints them by itself when a long run has finished nothing for ``stall_s``
seconds (re-armed by every finished job), so a hung run leaves its reason in the log.
"""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys


def install_diagnostics() -> None:
    with contextlib.suppress(AttributeError, ValueError, RuntimeError, OSError):
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


class StallWatch:
    """Dumps all thread stacks to stderr each time ``stall_s`` pass without ``progress()``."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.progress()

    def progress(self) -> None:
        if self.stall_s > 0:
            with contextlib.suppress(RuntimeError, OSError, ValueError):
                faulthandler.dump_traceback_later(self.stall_s, repeat=True, file=sys.stderr)

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, ValueError):
            faulthandler.cancel_dump_traceback_later()
