"""Progress of long runs (bench, synth, problems lint): a live bar on a terminal, plain lines
in a log. Progress never goes to stdout, which stays the command's result (``--json``).

When stderr is a terminal, a rich progress bar (on stderr). Otherwise one plain line per
finished job on stderr, flushed at once (``[12/227 1m40s] L1_5: correct 1.23x eager (14.2 s)``),
and every ``interval`` seconds a summary from the pool's job board: done / running per phase /
queued, and the jobs longest in their phase, so a stuck run says where. If nothing finishes for
``stall_s`` seconds, every thread's stack goes to stderr (``diagnostics.StallWatch``).
``CUDA_AGENT_PROGRESS`` = ``auto`` | ``bar`` | ``plain`` overrides the choice;
``CUDA_AGENT_PROGRESS_INTERVAL`` the summary period.

``Status`` is the same choice for one long step (an evaluation, the demo's episode): a spinner
on a terminal; in a log a line when it starts, one at each new stage, and one every
``HEARTBEAT_S`` seconds while a stage lasts (a build, a worker's wait), so a log is never
silent for longer than that.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType

from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.status import Status as Spinner

from cuda_agent.cli.common import err_console
from cuda_agent.cli.diagnostics import StallWatch
from cuda_agent.cluster.board import JobBoard, describe

SUMMARY_INTERVAL_S = 15.0
HEARTBEAT_S = 10.0
STALL_S = 900.0


class _Ticker:
    """Calls ``tick`` every ``interval_s`` seconds on a daemon thread until ``stop()``: the
    periodic lines of a log (``Reporter``'s summaries, ``Status``'s heartbeat)."""

    def __init__(self, interval_s: float, tick: Callable[[], None], name: str) -> None:
        self._interval_s = interval_s
        self._tick = tick
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=name)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            self._tick()

    def stop(self) -> None:
        """No tick after this; waits (2 s at most) for one under way."""
        self._stopped.set()
        self._thread.join(timeout=2)


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
        self._lock = threading.Lock()
        self._ticker: _Ticker | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._watch: StallWatch | None = None

    def __enter__(self) -> Reporter:
        self._watch = StallWatch(STALL_S)
        if self.plain:
            self._print(f"{self.label}: {self.total} jobs, {self.done} already done")
            self._ticker = _Ticker(self.interval_s, self._summary, "progress")
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
        if self._ticker is not None:
            self._ticker.stop()
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

    def _summary(self) -> None:
        """The periodic line: what the pool's jobs do (or how many are done, without a board)."""
        text = describe(self.board.snapshot()) if self.board is not None else f"done {self.done}"
        self._print(f"[{self.label} {self.done}/{self.total} {self._elapsed()}] {text}")

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._start)
        return f"{seconds // 60}m{seconds % 60:02d}s"

    def _print(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


class Status:
    """``with Status("eval", "evaluating x.py on relu") as status: status.update("build")``.

    On a terminal a rich spinner on stderr; otherwise plain lines on stderr (see the module
    docstring): ``[eval 0m20s] build: compiling (still running, 0m10s in this stage)``.
    """

    def __init__(self, label: str, text: str, interval_s: float = HEARTBEAT_S) -> None:
        self.label = label
        self.text = text
        self.interval_s = interval_s
        self.plain = plain_wanted()
        self._start = self._stage_start = time.monotonic()
        self._lock = threading.Lock()
        self._ticker: _Ticker | None = None
        self._spinner: Spinner | None = None

    def __enter__(self) -> Status:
        if self.plain:
            self._print(f"{self.label}: {self.text}")
            self._ticker = _Ticker(self.interval_s, self._heartbeat, "status")
        else:
            self._spinner = err_console.status(self.text)
            self._spinner.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._ticker is not None:
            self._ticker.stop()
        if self._spinner is not None:
            self._spinner.stop()

    def update(self, text: str) -> None:
        """A new stage: a line now (plain), the spinner's text (terminal)."""
        with self._lock:
            changed = text != self.text
            self.text = text
            if changed:
                self._stage_start = time.monotonic()
        if self.plain and changed:
            self._print(f"[{self.label} {_clock(time.monotonic() - self._start)}] {text}")
        elif self._spinner is not None:
            self._spinner.update(text)

    def _heartbeat(self) -> None:
        """The periodic line: the stage still running, and for how long."""
        with self._lock:
            text, stage_s = self.text, time.monotonic() - self._stage_start
        elapsed = _clock(time.monotonic() - self._start)
        self._print(f"[{self.label} {elapsed}] {text} (still running, {_clock(stage_s)})")

    def _print(self, line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _clock(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 60}m{whole % 60:02d}s"
