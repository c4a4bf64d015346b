"""What follows a verified candidate: the memory check and the torch.compile baseline, started
as soon as the candidate's worker says verification passed, beside its timing and each other.

A correct verdict needs three things from three processes: the candidate's worker (verify,
time), the memory check (one forward under a checker) and the torch.compile baseline (its own
clean process). Run one after the other, a correct candidate held its job's slot for the sum;
the checker's start (imports and a CUDA context under compute-sanitizer) and torch.compile's
compilation are mostly CPU work that needs no turn on the device. So the worker sends a
``verified`` line once verification passed (with its device and the device names of the
candidate's kernels), and ``FollowUps.start`` then runs both in threads; the device's turns
(``worker/device_turn.py``) still keep every timing alone on the GPU. The pipeline collects
their answers once the worker has finished (``memory()``, ``baseline()``), or ``cancel``s them
when the verdict no longer needs them (the memory check's worker is killed; a baseline runs to
its end, which the cache keeps). The evaluation's own ``cancel`` (its caller stopped it) does the
same: nothing starts once it is set, and ``memory()`` stops the check within about a second of
it while it waits for the answer (the candidate's worker, which sees that event itself, has
ended by then; while that worker runs, the pipeline cancels the check when the worker stops).

The kernel names the memory check instruments are those of the modules this process built
(``worker/kernel_symbols.py``) and those the worker reported (modules it built at run time,
Triton kernels); where either side could not read them, every kernel is checked.

What it does not do: decide the verdict (``pipeline.py`` reads the answers in its order) or
run anything when its options ask for neither.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as WaitedTooLong  # the builtin only from 3.11
from pathlib import Path
from typing import Any

from cuda_agent.core.cancel import requested
from cuda_agent.core.types import Solution, SolutionKind
from cuda_agent.evaluator.builder.builder import BuildResult
from cuda_agent.evaluator.checks.compile_ratio import CompileBaseline, compile_baseline
from cuda_agent.evaluator.checks.memory_safety import CheckInputs, MemoryCheck, check_memory
from cuda_agent.evaluator.prepared import Prepared
from cuda_agent.evaluator.worker.kernel_symbols import device_kernel_names

Progress = Callable[[str, str], None]
WATCH_S = 1.0  # how often ``memory()`` looks at the evaluation's ``cancel`` while it waits
# on cpu the check is a build of its own (an instrumented copy of the extension, whose first
# build for a flag set also precompiles its header: most of a cold check), then one forward
ASAN_STAGE = "memory check (AddressSanitizer: the extension built again, instrumented, then run)"


class FollowUps:
    """The memory check and the compile baseline of one evaluation (see the module docstring)."""

    def __init__(
        self,
        prepared: Prepared,
        scratch: Path,
        env: dict[str, str],
        env_extra: dict[str, str] | None,
        device_lock: str,
        notify: Progress,
        stopped: threading.Event | None = None,
    ) -> None:
        self.prepared = prepared
        self.scratch = scratch
        self.env = env
        self.env_extra = env_extra
        self.device_lock = device_lock
        self.notify = notify
        self.seconds: dict[str, float] = {}  # each follow-up's wall seconds
        self._cancel = threading.Event()  # this evaluation's follow-ups only
        self._stopped = stopped  # the whole evaluation's (its caller's ``cancel``)
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._memory: Future[MemoryCheck] | None = None
        self._baseline: Future[CompileBaseline] | None = None

    def on_worker_event(self, event: dict[str, Any]) -> None:
        """A line of the candidate's worker: ``verified`` starts the follow-ups."""
        if event.get("type") == "verified":
            device = event.get("device")
            symbols = event.get("kernel_symbols")
            self.start(
                device if isinstance(device, dict) else None,
                [str(s) for s in symbols] if isinstance(symbols, list) else None,
            )

    def start(self, device: dict[str, Any] | None, kernel_symbols: list[str] | None) -> None:
        """Start what the options ask for (once; later calls do nothing)."""
        opts = self.prepared.opts
        with self._lock:
            if self._pool is not None or requested(self._stopped):
                return
            self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="follow-up")
            if opts.memory_check:
                names = self._kernel_names(kernel_symbols)
                self._memory = self._pool.submit(self._check_memory, device, names)
            if "compile" in opts.baselines and device is not None:
                self._baseline = self._pool.submit(self._compile_baseline, device)

    def memory(self) -> MemoryCheck | None:
        """The memory check's answer (None: not asked for); stopped once the evaluation is
        (the answer is then incomplete)."""
        if self._memory is None:
            return None
        while True:
            try:
                return self._memory.result(timeout=WATCH_S)
            except WaitedTooLong:
                if requested(self._stopped):
                    self.cancel()

    def baseline(self) -> CompileBaseline | None:
        """The compile baseline (None: not asked for, or no device record to key it by)."""
        return self._baseline.result() if self._baseline is not None else None

    def cancel(self) -> None:
        """The verdict no longer needs them: stop the memory check."""
        self._cancel.set()

    def close(self) -> None:
        """Wait for both (a cancelled check ends within a second)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def _kernel_names(self, reported: list[str] | None) -> list[str] | None:
        if self.prepared.opts.backend != "cuda" or reported is None:
            return None
        built = [b.module_path for b in self.prepared.builds if b.module_path is not None]
        own = device_kernel_names(built)
        return None if own is None else sorted(set(own) | set(reported))

    def _check_memory(self, device: dict[str, Any] | None, names: list[str] | None) -> MemoryCheck:
        began = time.monotonic()
        self.notify("memory", ASAN_STAGE if self.prepared.opts.backend == "cpu" else "memory check")
        prepared = self.prepared
        try:
            inputs = CheckInputs(
                prepared.problem,
                prepared.solution,
                prepared.opts,
                prepared.seed,
                self.scratch / "memory",
                self.env,
                self.device_lock,
                prepared.result.language,
                prebuilt_module(prepared.solution, prepared.builds),
                kernel_names=names,
                cancel=self._cancel,
            )
            return check_memory(inputs, device)
        finally:
            self.seconds["memory"] = round(time.monotonic() - began, 3)

    def _compile_baseline(self, device: dict[str, Any]) -> CompileBaseline:
        began = time.monotonic()
        self.notify("baseline", "torch.compile baseline")
        prepared = self.prepared
        try:
            return compile_baseline(
                prepared.problem,
                device,
                prepared.opts,
                self.scratch / "baseline",
                self.env_extra,
                self.device_lock,
            )
        finally:
            self.seconds["baseline"] = round(time.monotonic() - began, 3)


def prebuilt_module(solution: Solution, builds: list[BuildResult]) -> str | None:
    """The workdir's extension, built before the worker (single files build in it)."""
    if solution.kind is SolutionKind.WORKDIR and builds and builds[0].module_path:
        return str(builds[0].module_path)
    return None
