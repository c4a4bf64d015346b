"""``run.json``'s utilization figures, written however a ``bench run`` ends.

``RunFigures(out, pool)`` collects the results a run makes (``add``, once per record) and
writes ``utilization`` (``cluster.ledger.utilization``) with ``ended`` into ``run.json``:

* ``completed``: the run finished (``stop()`` at the end of its work, then the block's exit);
* ``interrupted (KeyboardInterrupt)`` or another exception's name: the block left early;
* ``signal SIGTERM`` / ``signal SIGHUP``: the command was told to end (``timeout``, a job
  scheduler); the figures are written first, then the handler that was there before runs
  (``evaluator.launch.worker_spawn.kill_workers_on_termination``: the workers killed, the process
  dies of the signal as usual).

Nothing is written when the run made no result (a resume with nothing left keeps the figures
of the run that did the work). What it does not do: write the results themselves
(``bench.records``: each as it is made), or decide whether a run resumes (``bench.fingerprint``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from cuda_agent.bench.records import read_run_info, write_run_info
from cuda_agent.cluster.ledger import utilization
from cuda_agent.cluster.pool import EvalPool
from cuda_agent.core.types import EvalResult

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class RunFigures:
    """The figures of one ``bench run`` into ``out/run.json`` (module docstring)."""

    def __init__(self, out: Path, pool: EvalPool) -> None:
        self.out = out
        self.pool = pool
        self.results: list[EvalResult] = []
        self.started = time.monotonic()
        self.stopped: float | None = None
        self.written = False
        self._previous: dict[int, Any] = {}

    def add(self, result: EvalResult) -> None:
        self.results.append(result)

    def stop(self) -> None:
        """The run's work is over (its wall time ends here, before the pool shuts down)."""
        self.stopped = time.monotonic()

    def write(self, ended: str) -> None:
        if self.written or not self.results:
            return
        self.written = True
        wall = (self.stopped or time.monotonic()) - self.started
        ledger = self.pool.ledger if self.pool.measures_devices else None
        figures = utilization(ledger, self.pool.devices, wall, self.results)
        info = read_run_info(self.out)
        write_run_info(self.out, {**info, "utilization": figures, "ended": ended})

    def __enter__(self) -> RunFigures:
        for signum in SIGNALS:
            with contextlib.suppress(ValueError):  # not the main thread: no handler
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._restore()
        self.write("completed" if kind is None else f"interrupted ({kind.__name__})")

    def _restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous.get(signum, signal.SIG_DFL)
        self._restore()
        with contextlib.suppress(Exception):  # the figures must not stop the command ending
            self.write(f"signal {signal.Signals(signum).name}")
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
