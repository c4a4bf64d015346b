"""Score a batch of curriculum replies, one after another or several at once through a pool.

``score_batch(task, specs, replies, backend, options, evaluator, jobs)`` returns one
``tasks.Score`` per reply, in order. With ``jobs == 1`` it calls ``tasks.score_reply`` for each
reply in turn with the caller's evaluator. With ``jobs > 1`` the replies are scored ``jobs`` at
a time: with the harness's own evaluator, ``pooled_evaluator(backend, jobs, evaluator)`` (open
once per run) sends them to a ``LocalPool`` with ``jobs`` jobs per device, whose workers take
turns on the device through its lock, so timing still runs alone on the GPU; every evaluation
keeps the full integrity checks of the task's policy.

What it does not do: choose the policy (the task does), or score anything the evaluator did
not run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.curriculum.tasks import Score, score_reply


@contextlib.contextmanager
def pooled_evaluator(backend: str, jobs: int, evaluator: Evaluator) -> Iterator[Evaluator]:
    """The evaluator to score with: for ``jobs > 1`` and the harness's own ``evaluate``, a
    ``LocalPool``'s (``jobs`` jobs per device, closed on leaving); otherwise ``evaluator``
    as given (a caller's own evaluator is never replaced)."""
    if jobs <= 1 or evaluator is not evaluate:
        yield evaluator
        return
    from cuda_agent.cluster.local import LocalPool

    with LocalPool(backend, jobs_per_device=jobs) as pool:
        yield pool.evaluate


def score_batch(
    task: str | list[str],
    specs: list[str],
    replies: list[str],
    backend: str,
    options: EvalOptions | None,
    evaluator: Evaluator,
    jobs: int = 1,
    scored: Callable[[int, Score], None] | None = None,
) -> list[Score]:
    """The score of each reply (``specs[i]`` is the problem of ``replies[i]``; ``task`` is
    every reply's, or one per reply); ``scored(index, score)`` is called as each one is
    made (from the scoring threads), so a caller can keep it before the batch ends."""
    tasks = [task] * len(replies) if isinstance(task, str) else list(task)
    if not len(specs) == len(replies) == len(tasks):
        raise ValueError(
            f"score_batch: {len(specs)} problems and {len(tasks)} tasks for {len(replies)} replies"
        )

    def one(index: int) -> Score:
        score = score_reply(tasks[index], specs[index], replies[index], backend, options, evaluator)
        if scored is not None:
            scored(index, score)
        return score

    if jobs <= 1 or len(replies) <= 1:
        return [one(i) for i in range(len(replies))]
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="curriculum-score") as executor:
        return list(executor.map(one, range(len(replies))))
