"""What the stages of one ``evaluate`` request share: the ``EvaluationSession``, and the verdict.

``modes/evaluate.py`` builds the session once the reference exists, the harness's snapshots are
taken and the build shim is installed (steps 1 and 2 of its order), and the stages of ``verify.py``
and ``timed.py`` take it as their one argument about the evaluation. ``Verdict`` is how any
stage stops the evaluation with a failing result; ``Phases`` times the stages.

What it does not do: run anything, judge anything or decide the order of events (the stages
and ``modes/evaluate.py`` do); the session only carries what they share.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cuda_agent.core.records import EvaluationRecord
from cuda_agent.evaluator.worker.candidate import Instance
from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.guards import FunctionIdentities, GlobalState
from cuda_agent.evaluator.worker.policies import PolicyRules
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import Reference
from cuda_agent.evaluator.worker.shim import BuildShim


class Verdict(Exception):
    """Stops the evaluation with a failing verdict at ``stage``."""

    def __init__(self, stage: str, message: str, flags: list[str] | None = None) -> None:
        super().__init__(message)
        self.stage = stage
        self.flags = flags or []


class Phases:
    """Wall-clock seconds per phase of the worker (reported in ``details.worker_phases_s``)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 4)
        self._last = now


@dataclass
class EvaluationSession:
    """One evaluation: the request, its record, the pristine reference and the harness's guards.

    * ``result``: the record the stages fill in (returned by ``evaluate.run``);
    * ``canary``: the fingerprint of the reference's output on trial 0, taken before any
      candidate code ran;
    * ``rules``: what ``req.settings.policy`` decides (``policies.py``);
    * ``shim``: the build shim, installed; its ``usage`` counts custom calls;
    * ``state``, ``identities``: the snapshots of global switches and harness functions;
    * ``threads_before``: the thread count the integrity checks compare with (taken again
      after the kernel record: the profiler starts threads of its own);
    * ``files``: the solution's ``.py`` files as they were before its import;
    * ``instance``: ModelNew, built and given its weights (``None`` until then).
    """

    req: WorkerRequest
    channel: ResultChannel
    result: EvaluationRecord
    phases: Phases
    device: Device
    ref: Reference
    canary: list[tuple[int, ...]]
    rules: PolicyRules
    shim: BuildShim
    state: GlobalState
    identities: FunctionIdentities
    threads_before: int
    files: tuple[str, ...]
    instance: Instance | None = None

    @property
    def cand(self) -> torch.nn.Module:
        """ModelNew (once built)."""
        if self.instance is None:
            raise RuntimeError("ModelNew is not built yet")
        return self.instance.model


def solution_files(req: WorkerRequest) -> tuple[str, ...]:
    """The solution's ``.py`` files now (tracebacks show their frames)."""
    return tuple(str(p) for p in Path(req.solution_root).rglob("*.py"))


def call(model: torch.nn.Module, inputs: list[Any]) -> Any:
    return model(*inputs)
