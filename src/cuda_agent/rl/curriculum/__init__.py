"""A curriculum a small model can climb: single-turn kernel tasks over elementwise problems.

``ops`` (the elementwise operators and their compositions), ``problem_set`` (the problems,
split into train and held-out and decontaminated), ``scaffold`` (the fill-in workspace),
``tasks`` (the three tasks: prompts, answers, rewards), ``evaluate`` (a model's pass rate on a
split). docs/training.md has the overview. Here: the task names and the evaluation policy
each task is scored under (importing this package loads nothing else).
"""

TASKS = ("model-new", "fill-in", "kernel")
POLICIES = {"model-new": "off", "fill-in": "strict", "kernel": "strict"}


def task_names(task: str) -> list[str]:
    """The rungs of a task spec: one name, or several joined by ``+`` (``fill-in+kernel``),
    unchecked."""
    return task.split("+")
