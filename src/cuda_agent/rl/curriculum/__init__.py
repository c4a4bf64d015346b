"""A curriculum a small model can climb: single-turn kernel tasks over small problems.

``ops`` (the elementwise operators and their compositions), ``families`` (the problem
families: elementwise, chain, rowwise, reduction; a problem's family from its id, each
family's kernel contract and tasks), ``chains`` and ``row_ops`` (the chain and row families'
draws), ``sources`` (the problem files), ``problem_set`` (the problems, split into train and
held-out and decontaminated), ``scaffold`` (the workspace around a kernel), ``kernel_prompts``
and ``tasks`` (the three tasks: prompts, answers, rewards), ``reference`` (a correct kernel for
any problem), ``evaluate`` (a model's pass rate on a split). docs/training.md has the overview.
Here: the task names and the evaluation policy each task is scored under (importing this
package loads nothing else).
"""

TASKS = ("model-new", "fill-in", "kernel")
POLICIES = {"model-new": "off", "fill-in": "strict", "kernel": "strict"}


def task_names(task: str) -> list[str]:
    """The rungs of a task spec: one name, or several joined by ``+`` (``fill-in+kernel``),
    unchecked."""
    return task.split("+")
