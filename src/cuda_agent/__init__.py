"""CUDA Agent: agents that turn PyTorch modules into fast, correct CUDA kernels.

The front door for library users; everything here is imported on first use, so
``import cuda_agent`` (and ``cuda-agent --version``) costs nothing and never imports torch::

    from cuda_agent import EvalOptions, evaluate, load_problem, load_solution

    problem = load_problem("relu", size="small")  # a bundled problem id or a problem file
    solution = load_solution("src/cuda_agent/examples/relu/cpu.py")  # a .py file or a workdir
    options = EvalOptions(backend="cpu", baselines=("eager",)).validate()
    result = evaluate(problem, solution, options)
    print(result.correct, result.reward, result.speedup_eager, result.flags)

Public names:

* ``evaluate(problem, solution, options)`` -> ``EvalResult``: build, verify, time, reward;
* ``EvalOptions`` (with the paper's defaults; ``.validate()`` checks them) and
  ``EvalSettings``, the part of them that every worker request carries;
* ``EvalResult``, ``Problem``, ``Solution``: the records;
* ``load_problem(spec, size="standard")``, ``load_problem_set(spec, ...)``,
  ``load_solution(path)``;
* ``KernelEnvironment`` and ``EpisodeScore``: one agent episode's workdir, sandboxed tools and
  reward, for drivers of one's own (``run_episode`` drives it with a chat model).

The package is layered (imports point down, or sideways within a layer): ``core``,
``examples`` <- ``problems``, ``solutions``, ``workspace`` <- ``evaluator`` <- ``cluster`` <-
``agent``, ``service`` <- ``environment``, ``rollout`` <- ``bench``, ``synth``, ``rl``, ``export``
<- ``cli`` (tests/test_structure.py checks it, and that no import goes round in a circle).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cuda_agent.core.version import __version__

# public name -> the module that defines it
_EXPORTS = {
    "evaluate": "cuda_agent.evaluator.pipeline",
    "EvalOptions": "cuda_agent.evaluator.options",
    "EvalSettings": "cuda_agent.evaluator.worker.protocol",
    "EvalResult": "cuda_agent.core.types",
    "Problem": "cuda_agent.core.types",
    "Solution": "cuda_agent.core.types",
    "load_problem": "cuda_agent.problems.sets",
    "load_problem_set": "cuda_agent.problems.sets",
    "load_solution": "cuda_agent.solutions.loader",
    "KernelEnvironment": "cuda_agent.environment",
    "EpisodeScore": "cuda_agent.environment",
    "run_episode": "cuda_agent.rollout",
}
_ALIASES = {"load_problem": "resolve_problem"}  # the defining module's own name for it

__all__ = [
    "EpisodeScore",
    "EvalOptions",
    "EvalResult",
    "EvalSettings",
    "KernelEnvironment",
    "Problem",
    "Solution",
    "__version__",
    "evaluate",
    "load_problem",
    "load_problem_set",
    "load_solution",
    "run_episode",
]

if TYPE_CHECKING:
    from cuda_agent.core.types import EvalResult, Problem, Solution
    from cuda_agent.environment import EpisodeScore, KernelEnvironment
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.evaluator.worker.protocol import EvalSettings
    from cuda_agent.problems.sets import load_problem_set
    from cuda_agent.problems.sets import resolve_problem as load_problem
    from cuda_agent.rollout import run_episode
    from cuda_agent.solutions.loader import load_solution


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cuda_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _ALIASES.get(name, name))
    globals()[name] = value  # found once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
