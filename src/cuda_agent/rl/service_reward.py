"""Reward functions that score replies through the reward service, for TRL and for verl.

Both take a batch of model replies, pull each one's solution file out (``reply.
extract_solution``: the last fenced block defining ``ModelNew``), send every one that has a
solution to the service in one batch request, and wait for the results (the client retries
network errors and 5xx answers; a job that does not finish in ``timeout_s`` is cancelled and
scores as a failure). A reply without a solution, or a job the service ends without a result,
scores ``NO_SOLUTION_REWARD`` (-1), as every incorrect solution does.

* ``ServiceReward(url)`` is a TRL reward function: ``reward(prompts, completions, problem=...,
  **columns) -> list[float]`` (``problem`` is the dataset's column of problem specs; chat-style
  completions are read from their last message);
* ``compute_score_batch(data_sources, solution_strs, ground_truths, extra_infos, service=URL)``
  is verl's batch reward function (``reward_model.reward_manager=batch``): a list of the same
  dicts ``verl.reward.compute_score`` returns (``reply.score_record``).

The service URL comes from the argument, else ``CUDA_AGENT_SERVICE``; the token from
``CUDA_AGENT_TOKEN``. What they do not do: cache verdicts, or evaluate anything locally.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cuda_agent.core.hashing import files_hash
from cuda_agent.core.types import EvalResult, Solution, SolutionKind
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.reply import NO_SOLUTION_REWARD, extract_solution, score_record
from cuda_agent.service.client import TOKEN_ENV, ServiceClient, ServiceFailed

SERVICE_ENV = "CUDA_AGENT_SERVICE"


def _url(url: str | None) -> str:
    chosen = url or os.environ.get(SERVICE_ENV)
    if not chosen:
        raise ValueError(f"no reward service: pass its URL or set {SERVICE_ENV}")
    return chosen


def _text(completion: Any) -> str:
    """A completion as TRL passes it: text, or a chat (a list of messages)."""
    if isinstance(completion, list) and completion:
        last = completion[-1]
        return str(last.get("content", "")) if isinstance(last, dict) else str(last)
    return str(completion)


def _solution(source: str) -> Solution:
    files = {"solution.py": source}
    return Solution(SolutionKind.SINGLE_FILE, Path("solution.py"), files, files_hash(files.items()))


def score_batch(
    url: str,
    items: Sequence[tuple[str, str, str]],
    options: dict[str, Any] | None = None,
    timeout_s: float = 1800.0,
    token: str | None = None,
) -> list[EvalResult | None]:
    """(problem spec, size, reply) -> the service's result, None when there is no solution
    or no result."""
    work: list[tuple[int, Any, Solution]] = []
    for index, (spec, size, reply) in enumerate(items):
        source = extract_solution(reply)
        if source is not None:
            work.append((index, resolve_problem(spec, size), _solution(source)))
    out: list[EvalResult | None] = [None] * len(items)
    if not work:
        return out

    async def run() -> list[EvalResult | ServiceFailed]:
        async with ServiceClient(url, token or os.environ.get(TOKEN_ENV)) as client:
            return await client.evaluate_many(
                [(p, s) for _, p, s in work], options, timeout_s=timeout_s
            )

    results = asyncio.run(run())
    for (index, _, _), result in zip(work, results, strict=True):
        out[index] = result if isinstance(result, EvalResult) else None
    return out


class ServiceReward:
    """A TRL reward function over the reward service (see the module docstring)."""

    def __init__(
        self,
        url: str | None = None,
        size: str = "standard",
        options: dict[str, Any] | None = None,
        timeout_s: float = 1800.0,
    ) -> None:
        self.url = _url(url)
        self.size, self.options, self.timeout_s = size, options, timeout_s
        self.__name__ = "cuda_agent_service_reward"  # TRL logs rewards by function name

    def __call__(
        self,
        prompts: Sequence[Any] | None = None,
        completions: Sequence[Any] = (),
        problem: Sequence[str] | None = None,
        size: Sequence[str] | None = None,
        **_columns: Any,
    ) -> list[float]:
        if problem is None:
            raise ValueError("ServiceReward needs the dataset's 'problem' column")
        sizes = list(size) if size is not None else [self.size] * len(completions)
        items = [
            (str(p), str(s or self.size), _text(c))
            for p, s, c in zip(problem, sizes, completions, strict=True)
        ]
        results = score_batch(self.url, items, self.options, self.timeout_s)
        return [r.reward if r is not None else NO_SOLUTION_REWARD for r in results]


def compute_score_batch(
    data_sources: Sequence[str | None],
    solution_strs: Sequence[str],
    ground_truths: Sequence[str],
    extra_infos: Sequence[dict[str, Any] | None] | None = None,
    *,
    service: str | None = None,
    size: str | None = None,
    policy: str | None = None,
    baselines: Sequence[str] | None = None,
    timeout_s: float = 1800.0,
    **_: Any,
) -> list[dict[str, float]]:
    """verl's batch reward function (see the module docstring)."""
    infos = list(extra_infos or [None] * len(solution_strs))
    items = [
        (str(truth), str((info or {}).get("size") or size or "standard"), str(reply))
        for truth, reply, info in zip(ground_truths, solution_strs, infos, strict=True)
    ]
    options: dict[str, Any] = {}
    if policy is not None:
        options["policy"] = policy
    if baselines is not None:
        options["baselines"] = list(baselines)
    results = score_batch(_url(service), items, options, timeout_s)
    return [score_record(r) for r in results]
