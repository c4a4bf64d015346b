"""Progress of long runs (bench, synth, problems lint): a live bar on a terminal, plain lines
in a log. Progress never goes to stdout, which stays the command's result (``--json``).

When stderr is a terminal, a rich progress bar (on stderr). Otherwise one plain line per
finished job on stderr, flushed at once (``[12/227 1m40s] L1_5: correct 1.23x eager (14.2 s)``),
and every ``interval`` seconds a summary from the pool's job board: done / running per phase /
queued, and the jobs longest in their phase, so a stuck run says where. If nothing finishes for
``stall_s`` seconds, every thread's stack goes to stderr (``diagnostics.StallWatch``).
``CUDA_AGENT_PROGRESS`` = ``auto`` | ``bar`` | ``plain`` overrides the choice;
``CUDA_AGENT_PROGRESS_INTERVAL`` the summary period.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from cuda_agent.cli.common import err_console
from cuda_agent.cli.diagnostics import StallWatch
from cuda_agent.cluster.board import JobBoard, describe

SUMMARY_INTERVAL_S = 30.0
STALL_S = 900.0


def plain_wanted() -> bool:
    mode = os.environ.get("CUDA_AGENT_PROGRESS", "auto")
    if mode in ("plain", "bar"):
        return mode == "plain"
    return not sys.stderr.isatty()


class Reporter:
    """``with Reporter("bench", total, board) as rep: ... rep.finished("L1_5: correct")``."""

    def __init__(
        self,
        label: str,
        total: int,
        board: JobBoard | None = None,
        done: int = 0,
        interval_s: float | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.done = done
        self.board = board
        self.plain = plain_wanted()
        env_interval = os.environ.get("CUDA_AGENT_PROGRESS_INTERVAL")
        self.interval_s = interval_s or float(env_interval or SUMMARY_INTERVAL_S)
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._watch: StallWatch | None = None

    def __enter__(self) -> Reporter:
        self._watch = StallWatch(STALL_S)
        if self.plain:
            self._print(f"{self.label}: {self.total} jobs, {self.done} already done")
            self._thread = threading.Thread(target=self._summaries, daemon=True, name="progress")
            self._thread.start()
        else:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=err_console,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total, completed=self.done)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._bar is not None:
            self._bar.__exit__(kind, value, tb)
        if self._watch is not None:
            self._watch.close()
        if self.plain:
            self._print(f"{self.label}: finished {self.done}/{self.total}")

    def finished(self, line: str, description: str | None = None) -> None:
        """One job finished: ``line`` describes it (plain mode), ``description`` the totals."""
        with self._lock:
            self.done += 1
            done = self.done
        if self._watch is not None:
            self._watch.progress()
        if self.plain:
            self._print(f"[{done}/{self.total} {self._elapsed()}] {line}")
        elif self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, description=description or self.label)

    def describe(self, description: str) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=description)

    def _summaries(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.board is not None:
                text = describe(self.board.snapshot())
            else:
                text = f"done {self.done}"
            self._print(f"[{self.label} {self.done}/{self.total} {self._elapsed()}] {text}")

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._start)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def _print(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
