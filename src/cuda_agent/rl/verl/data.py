"""Problem sets as verl training data: one parquet row per problem, for the PPO stages.

verl's RL dataset reads a parquet file whose rows carry the chat prompt, a data source, the
reward model's ground truth and free-form ``extra_info``; agentic rows also name the agent
loop that runs them. Here every problem of a set (bundled, a KernelBench checkout, a
synthesised dataset, ...) becomes such a row:

* ``reward_model.ground_truth`` and ``extra_info.problem``: the problem spec
  (``problems.sets.problem_spec``), which both our agent loop and our single-turn reward
  resolve back to the same problem; ``extra_info.size``: the problem size;
* single-turn rows: a system prompt asking for one whole solution file and a user turn with
  the problem's source (``reward`` takes the reply's last ``ModelNew`` code block);
* agentic rows: the agent's system prompt only (the agent loop adds the task prompt with the
  episode's workdir) and the agent-loop name.

A split of the curriculum (``write_curriculum_dataset``) becomes single-turn rows the same
way, with the curriculum task's prompt (``rl/curriculum/tasks.py``) and ``extra_info.task``,
which the single-turn reward reads to score the reply as that task.

Column names are verl's (``compat``). Not here: tokenisation or prompt-length filtering
(verl does both), or validation sets (the same function serves them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.agent.prompts import SYSTEM_PROMPT
from cuda_agent.core.types import Problem
from cuda_agent.problems.sets import load_problem_set, problem_spec
from cuda_agent.rl.verl import compat

DATA_SOURCE = "cuda_agent"

SINGLE_TURN_SYSTEM = """\
You are an expert GPU kernel engineer. You are given a PyTorch program (class Model, with
get_inputs and get_init_inputs). Write a faster replacement: a complete Python file that
defines class ModelNew(nn.Module), with the same constructor arguments and forward signature
as Model, that computes the same outputs with custom {kind} compiled through
torch.utils.cpp_extension.load_inline. Reply with that file as one fenced ```python code
block; the last such block is evaluated for correctness on fresh inputs and timed."""


def single_turn_messages(problem: Problem, backend: str) -> list[dict[str, str]]:
    kind = "CUDA kernels" if backend == "cuda" else "C++ kernels"
    user = (
        f"Problem `{problem.id}`:\n\n```python\n{problem.source.rstrip()}\n```\n\nWrite ModelNew."
    )
    return [
        {"role": "system", "content": SINGLE_TURN_SYSTEM.format(kind=kind)},
        {"role": "user", "content": user},
    ]


def verl_rows(problems: list[Problem], agentic: bool, backend: str) -> list[dict[str, Any]]:
    """One verl dataset row per problem (see the module docstring)."""
    rows = []
    for index, problem in enumerate(problems):
        spec = problem_spec(problem)
        prompt = (
            [{"role": "system", "content": SYSTEM_PROMPT}]
            if agentic
            else single_turn_messages(problem, backend)
        )
        row: dict[str, Any] = {
            compat.DATA_SOURCE_KEY: DATA_SOURCE,
            compat.PROMPT_KEY: prompt,
            compat.REWARD_MODEL_KEY: {"style": "rule", "ground_truth": spec},
            compat.EXTRA_INFO_KEY: {
                "problem": spec,
                "size": problem.size,
                "index": index,
                "level": int(problem.level or 0),
            },
        }
        if agentic:
            row[compat.AGENT_NAME_KEY] = compat.AGENT_LOOP_NAME
        rows.append(row)
    return rows


def write_verl_dataset(
    problems_spec: str, out: Path, agentic: bool, backend: str, size: str = "standard"
) -> int:
    """Write the rows of a problem set to ``out`` (parquet); returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    problems = load_problem_set(problems_spec, size=size)
    rows = verl_rows(problems, agentic, backend)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    pq.write_table(pa.Table.from_pylist(rows), partial)
    partial.replace(out)  # never a half-written file under the final name
    return len(rows)


def write_curriculum_dataset(
    task: str, folder: str | None, split: str, out: Path, backend: str, size: str = "standard"
) -> int:
    """Write one split of a curriculum problem set (when ``folder`` is None, the default set
    at ``size``) as single-turn rows of ``task`` to ``out`` (parquet), the problems ``task``
    supports (``families.supports``); returns the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.rl.curriculum.families import family_of, supports
    from cuda_agent.rl.curriculum.problem_set import (
        CurriculumSpec,
        problem_set_folder,
        read_split,
        row_spec,
    )
    from cuda_agent.rl.curriculum.tasks import messages

    source = Path(folder) if folder else problem_set_folder(CurriculumSpec(size=size))
    rows = []
    for index, row in enumerate(read_split(source, split)):
        if not supports(task, family_of(str(row["id"]))):
            continue  # fill-in has no row-wise or reduction problems
        spec = row_spec(source, row)
        problem = resolve_problem(spec)
        rows.append(
            {
                compat.DATA_SOURCE_KEY: DATA_SOURCE,
                compat.PROMPT_KEY: messages(task, problem, backend),
                compat.REWARD_MODEL_KEY: {"style": "rule", "ground_truth": spec},
                compat.EXTRA_INFO_KEY: {
                    "problem": spec,
                    "size": problem.size,
                    "index": index,
                    "level": 1,
                    "task": task,
                },
            }
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    pq.write_table(pa.Table.from_pylist(rows), partial)
    partial.replace(out)
    return len(rows)
