"""The single-turn stage's reward: one reply, one candidate solution, the harness's verdict.

verl calls ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...,
**reward_kwargs)`` for every reply (its custom reward function, set by ``cuda-agent train
single-turn`` through ``compat.reward_overrides``; ``reward_kwargs`` are the stage's
``evaluation`` section: backend, policy, baselines, pool). Here:

* ``ground_truth`` is the problem spec (a bundled id, a file, ``DATASET#id``); the size is
  ``extra_info.size``, else ``size`` (``standard``);
* the solution is the last fenced code block of the reply that defines ``class ModelNew``
  (any language tag, or none), else the whole reply if it defines one: a KernelBench single
  file, evaluated as such (``rl/reply.extract_solution``);
* the score is the evaluator's reward (-1 for anything incorrect, including a reply without a
  solution; 1 and up for a correct one, by speed-up);
* a curriculum row (``extra_info.task``: ``model-new`` or ``fill-in``, written by
  ``data.write_curriculum_dataset``) is scored as that task instead
  (``rl/curriculum/tasks.score_reply``: its answer format and its evaluation policy).

The result is a dict, ``score`` first, with the same numeric keys every time (verl logs
them; ``rl/reply.score_record``): ``correct``, ``compiled``, ``speedup_eager`` and
``speedup_compile`` (0.0 when not measured), ``no_solution``.

What it does not do: build the single-turn dataset (rows need ``prompt``, ``data_source``,
``reward_model.ground_truth`` and ``extra_info.size``), parse tool calls or several files (a
single-turn reply is one file), or cache verdicts of identical replies.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from pathlib import Path
from typing import Any

from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum.tasks import score_reply
from cuda_agent.rl.reply import extract_solution, score_record
from cuda_agent.rl.verl.evaluation_config import EvaluationSettings
from cuda_agent.solutions.loader import load_solution

DEFAULT_SIZE = "standard"


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None = None,
    *,
    backend: str | None = None,
    policy: str | None = None,
    baselines: list[str] | tuple[str, ...] | None = None,
    pool: str | None = None,
    size: str | None = None,
    eval_options: EvalOptions | None = None,
    evaluator: Evaluator | None = None,
    **_: Any,
) -> dict[str, float]:
    """verl 0.9.1's custom reward function signature; ``eval_options`` / ``evaluator``
    override the settings (for tests and scripts; verl passes neither), other keyword
    arguments verl may add are ignored."""
    settings = EvaluationSettings.from_mapping(
        {"backend": backend, "policy": policy, "baselines": baselines, "pool": pool}
    )
    options = eval_options or settings.options()
    chosen_size = str((extra_info or {}).get("size") or size or DEFAULT_SIZE)
    task = (extra_info or {}).get("task")
    if task:  # a curriculum row: the task reads the answer and sets the policy
        score = score_reply(
            str(task),
            str(ground_truth),
            solution_str,
            options.backend,
            options,
            evaluator or settings.evaluator(),
            chosen_size,
        )
        return score_record(score.result)
    problem = _problem(str(ground_truth), chosen_size)
    source = extract_solution(solution_str)
    if source is None:
        return score_record(None)
    result = _evaluate(problem, source, options, evaluator or settings.evaluator())
    return score_record(result)


@functools.lru_cache(maxsize=4096)
def _problem(spec: str, size: str) -> Problem:
    return resolve_problem(spec, size)


def _evaluate(
    problem: Problem, source: str, options: EvalOptions, evaluator: Evaluator
) -> EvalResult:
    folder = Path(tempfile.mkdtemp(prefix="ca-reward-"))
    try:
        path = folder / "solution.py"
        path.write_text(source, encoding="utf-8")
        return evaluator(problem, load_solution(path), options)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
