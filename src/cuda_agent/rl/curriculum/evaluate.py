"""A model's pass rate on one split of the curriculum: the point of a learning curve.

``evaluate_split(model_path, task, backend, folder, split)`` generates ``samples`` replies per
problem of the split with the task's prompt (greedy by default, or sampled at
``temperature``; batches of prompts at once, ``generation``), scores every distinct answer once
(``verdicts``; ``jobs`` at once through ``scoring``) and returns ``{"task", "split",
"problems", "samples", "temperature", "mean_reward", "pass_rate", "replies"}`` (``replies``:
one ``sampling.Sample`` each as a dict: the problem, its family and ops, the reply, the
answer read from it, the reward, the outcome, the evaluation's error stage and flags).
Run it on the held-out split of the base model and of a trained one to see whether training
generalised; ``report`` turns the replies into intervals over problems.

What it does not do: train anything, or compute intervals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.curriculum.generation import SamplingSettings
from cuda_agent.rl.curriculum.sampling import sample_split
from cuda_agent.rl.curriculum.tasks import check_task
from cuda_agent.rl.curriculum.verdicts import VerdictCache


def evaluate_split(
    model_path: str,
    task: str,
    backend: str,
    folder: Path,
    split: str = "heldout",
    *,
    limit: int | None = None,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    samples: int = 1,
    seed: int = 0,
    jobs: int = 1,
    device: str | None = None,
    eval_options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    cache: VerdictCache | None = None,
) -> dict[str, Any]:
    """``samples`` replies per problem (sampled at ``temperature``; greedy at 0, where more
    than one sample would repeat the same reply); ``device``: where the model generates
    (default: CUDA when there is a GPU); ``jobs``: evaluations at once (``scoring``)."""
    check_task(task)
    if samples < 1 or (temperature <= 0 and samples > 1):
        raise ValueError("evaluate_split: samples >= 1, and 1 when greedy (temperature 0)")
    settings = SamplingSettings(samples, temperature, max_new_tokens, seed)
    records = sample_split(
        model_path,
        task,
        backend,
        folder,
        split,
        settings,
        limit=limit,
        jobs=jobs,
        options=eval_options,
        evaluator=evaluator,
        cache=cache,
        device=device,
    )
    replies = [record.as_dict() for record in records]
    rewards = [r["reward"] for r in replies]
    return {
        "task": task,
        "split": split,
        "problems": len({r["problem"] for r in replies}),
        "samples": samples,
        "temperature": temperature,
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "pass_rate": sum(r >= 1.0 for r in rewards) / len(rewards) if rewards else None,
        "replies": replies,
    }
