"""An evaluation after its CPU stages (static check, build), ready for a device.

``pipeline.prepare`` makes one, ``pipeline.execute`` finishes it; pools carry it from a CPU
worker to a device worker (``cluster/artifacts.py``). Data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cuda_agent.core.records import StageError
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.builder.builder import BuildResult
from cuda_agent.evaluator.options import EvalOptions


@dataclass
class Prepared:
    """An evaluation after its CPU stages (static check, build), ready for a device.

    ``error`` is set when the candidate already failed; ``execute`` then only finishes the
    verdict. Pools run ``prepare`` on CPU workers and ``execute`` on device workers.
    """

    problem: Problem
    solution: Solution
    opts: EvalOptions
    seed: int
    result: EvalResult
    builds: list[BuildResult] = field(default_factory=list)
    error: StageError | None = None
    known_build_failures: dict[str, str] = field(default_factory=dict)
