"""The pool interface: ``submit(job) -> Future[EvalResult]``, and what every pool shares.

A job is one evaluation (problem, solution, options). Pools split it the same way: ``prepare``
(static check and build: CPU only) then ``execute`` (the worker process, on one device).
Infrastructure failures (an exception inside the pool, or an ``internal`` stage error) are
retried; a candidate's failure is a verdict and never retried.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from cuda_agent.core.types import EvalResult, Problem, Solution, StageError
from cuda_agent.evaluator.options import EvalOptions

log = logging.getLogger(__name__)


@dataclass
class EvalJob:
    problem: Problem
    solution: Solution
    options: EvalOptions


class EvalPool(ABC):
    """Evaluate many jobs concurrently; results come back as futures."""

    @abstractmethod
    def submit(self, job: EvalJob) -> Future[EvalResult]: ...

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def devices(self) -> list[str]: ...

    def __enter__(self) -> EvalPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_retries(
    run: Callable[[], EvalResult], problem_id: str, backend: str, retries: int
) -> EvalResult:
    """``run()``, again on infrastructure failures, at most ``retries`` more times."""
    last = ""
    for attempt in range(retries + 1):
        try:
            result = run()
        except Exception as err:  # the pool's own failure, not the candidate's
            last = f"{type(err).__name__}: {err}"
            log.warning(
                "evaluation of %s failed in the pool (attempt %d): %s",
                problem_id,
                attempt + 1,
                last,
            )
            continue
        if result.error is not None and result.error.stage == "internal" and attempt < retries:
            last = result.error.message
            continue
        return result
    failed = EvalResult(problem_id=problem_id, backend=backend)
    failed.error = StageError("internal", f"the evaluation pool failed: {last}")
    failed.flags.append("pool_failure")
    return failed
