"""Triton launches that the harness records itself: the hook on Triton's launch path.

``install(usage, interpreted)`` imports Triton before the candidate and replaces the launch
method of its kernel classes (``JITFunction.run``, and ``InterpretedFunction.run`` where
Triton runs kernels on the CPU, ``TRITON_INTERPRET=1``: the cpu backend) with a wrapper that
counts each launch in the build shim's ``usage``, so a Triton launch counts as a custom kernel
only when it went through here. ``watched()`` names the replaced methods for
``FunctionIdentities``: a candidate that rebinds them (to count fake launches) is flagged
``harness_patched``. ``skipping()`` turns every launch into a no-op for one call: the decoy
check (``verify.decoy_check``) asks whether the output is still right without the kernels.

On the interpreter, Triton's own copies between tensors and its numpy buffers are ATen ops
(``copy_``, ``set_``): the ops the launch issued are taken back out of the active op
recorder's counts afterwards, except those of the candidate's callables that Triton calls
back (a ``grid`` function), which stay counted. There is no switch to turn recording off. A
compiled kernel on a GPU issues no ATen op, and nothing is taken out there.

Each launch also records the name of the kernel it ran (``kernel_names``): the symbol of the
compiled kernel that ``JITFunction.run`` returns (``CompiledKernel.name``, from
``metadata.name`` in Triton 3.x: the PTX entry, what CUPTI reports), else the function's
``__name__`` (the interpreter compiles nothing). The GPU kernel record counts these beside the
kernels ``nm`` finds in the candidate's modules (``verify.kernel_check``, ``timed.profile``).
Autotuned kernels (``triton.autotune``, ``triton.heuristics``) launch through the same method.

What it does not do: count kernels launched around this path (``CompiledKernel`` objects run
by hand do not count, so they earn no custom-kernel credit), or look at what a kernel computes
(verification does).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from torch.utils._python_dispatch import _get_current_dispatch_mode

from cuda_agent.evaluator.worker.guards import OpRecorder

INTERPRET_ENV = "TRITON_INTERPRET"
CACHE_ENV = "TRITON_CACHE_DIR"


class TritonHook:
    """The installed hook (one per worker)."""

    def __init__(self, usage: Any, interpreted: bool) -> None:
        self.usage = usage
        self.interpreted = interpreted
        self.skip = False
        self.launches = 0
        self.kernel_names: set[str] = set()  # the kernels launched through the hook
        self._owners: list[Any] = []

    def watched(self) -> tuple[tuple[Any, str], ...]:
        return tuple((owner, "run") for owner in self._owners)

    @contextlib.contextmanager
    def skipping(self) -> Iterator[None]:
        self.skip = True
        try:
            yield
        finally:
            self.skip = False

    def wrap(self, owner: Any) -> None:
        original = owner.run
        hook = self

        @functools.wraps(original)
        def run(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            name = getattr(getattr(kernel, "fn", None), "__name__", None) or "kernel"
            hook.launches += 1
            hook.usage.calls += 1
            key = f"triton:{name}"
            hook.usage.by_function[key] = hook.usage.by_function.get(key, 0) + 1
            if hook.skip:
                return None
            if not hook.interpreted:
                return hook._named(original(kernel, *args, **kwargs), name, kwargs)
            recorder = _get_current_dispatch_mode()
            if not isinstance(recorder, OpRecorder):
                return hook._named(original(kernel, *args, **kwargs), name, kwargs)
            before = Counter(recorder.ops)
            kept: Counter[str] = Counter()
            if callable(kwargs.get("grid")):
                kwargs["grid"] = _counted(kwargs["grid"], recorder, kept)
            try:
                return hook._named(original(kernel, *args, **kwargs), name, kwargs)
            finally:
                recorder.ops = before + kept  # Triton's own copies out, the callbacks' in

        owner.run = run
        self._owners.append(owner)

    def _named(self, compiled: Any, fallback: str, kwargs: dict[str, Any]) -> Any:
        """Record the name of the kernel a launch ran; ``compiled`` is what Triton returned
        (passed through). A warm-up (``warmup=True``: compiled, not launched) records none."""
        if not kwargs.get("warmup"):
            self.kernel_names.add(compiled_kernel_name(compiled) or fallback)
        return compiled


def compiled_kernel_name(compiled: Any) -> str | None:
    """The symbol of a Triton ``CompiledKernel`` (``.name``, else ``.metadata.name``); None
    for anything else (the interpreter returns nothing)."""
    for holder in (compiled, getattr(compiled, "metadata", None)):
        name = getattr(holder, "name", None) if holder is not None else None
        if isinstance(name, str) and name:
            return name
    return None


def kernel_names(hook: TritonHook | None) -> set[str]:
    """The names of the kernels launched through the hook (none without one)."""
    return set(hook.kernel_names) if hook is not None else set()


def _counted(grid: Callable[..., Any], recorder: OpRecorder, kept: Counter[str]) -> Any:
    """The candidate's grid function; the ops it issues are kept in the counts."""

    @functools.wraps(grid)
    def call(*args: Any, **kwargs: Any) -> Any:
        before = Counter(recorder.ops)
        try:
            return grid(*args, **kwargs)
        finally:
            kept.update(recorder.ops - before)

    return call


def install(usage: Any, interpreted: bool, private: Any = None) -> TritonHook | None:
    """Import Triton (interpreted when ``interpreted``) and hook its launches; None when Triton
    is not installed here (a candidate's ``import triton`` then fails as it would anyway).
    ``private``: the worker's own folder for Triton's compile cache (never shared)."""
    if private is not None:
        os.environ[CACHE_ENV] = str(private)
    if interpreted:
        os.environ[INTERPRET_ENV] = "1"  # read when kernels are decorated: before the import
    try:
        from triton.runtime import jit
    except ImportError:
        return None
    hook = TritonHook(usage, interpreted)
    hook.wrap(jit.JITFunction)
    if interpreted:
        from triton.runtime import interpreter

        hook.wrap(interpreter.InterpretedFunction)
    return hook
