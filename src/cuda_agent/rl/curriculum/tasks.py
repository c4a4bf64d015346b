"""The curriculum's single-turn tasks: the prompt, the answer in a reply, and its reward.

* ``model-new`` (rung 1): the prompt holds the reference's ``Model`` class (after a one-shot
  example); the reply is ``class ModelNew`` (the last fenced block that defines it, as the
  single-turn reward reads it: ``rl.reply.extract_solution``), put after the problem
  file's imports and evaluated as a KernelBench single file under the ``off`` policy: a
  correct ``ModelNew`` that just calls torch earns 1 (more only if it is faster than the
  baselines), anything else -1.
* ``fill-in`` (rung 2; elementwise and chain problems only, ``families.supports``: another
  family's problem is a ``TaskError``): the system turn shows the kernel's per-element
  function with the expression left out, two examples follow as earlier turns, then the
  reference's expression (``y = torch...``); the reply is one C expression of ``x`` (the first
  line of the last fenced block, else of the reply; ``return``, ``y =`` and a final ``;`` are
  tolerated). It is written into the complete scaffold (``scaffold.write_scaffold``: C++ on
  the cpu backend, CUDA on cuda) and the workdir is evaluated under the ``strict`` policy: 1
  or more when the kernel computes the reference, -1 otherwise (a compile error included).
* ``kernel`` (rung 3, every family): the system turn states the contract of the problem's
  family (``kernel_prompts``: what y holds, the launch function,
  ``families.launch_signature``: ``elementwise_launch(x, y, n)``, ``rowwise_launch(x, y,
  rows, cols)`` or ``reduce_launch(x, y, rows, cols)``), one example of that family (a whole
  kernel and its launch for an op the curriculum does not have) follows, then the reference's
  expression; the reply is the whole kernel file (the last fenced block, which must define the
  family's launch): on cuda a ``__global__`` kernel and its launch on the given stream, on cpu
  the loops. It is put after the harness's headers (``scaffold.KERNEL_PRELUDES``) into the
  scaffold, whose binding and ``ModelNew`` stay the harness's, and evaluated under
  ``strict``, the memory check included: the model owns the indexing, so a kernel that reads
  or writes out of bounds is rejected.

A problem's family comes from its id (``families.family_of``; ``families.spec_family`` reads it
in a problem spec); callers that build datasets as (task x rows) keep the pairs for which
``families.supports(task, family)`` holds. ``outcome(score)`` names what became of a reply
(``format``, ``build``, ``wrong``, ``pass``), so a learning curve shows which failure the
policy climbs out of. The examples use ops the curriculum does not have (``exp``, ``log1p``,
centring a row), so no example is the answer to a problem. Prompts are short on purpose: a
135 M model follows a one- or two-shot conversation where it does not follow a page of
instructions.

``score_reply(task, problem_spec, reply, backend, options, evaluator)`` does the whole
scoring (a temporary folder per reply, removed after) and returns a ``Score``: the reward,
the answer it read (None: no answer in the reply, reward -1 without an evaluation) and the
evaluation's result. The task decides the policy; the other evaluation options (baselines,
timing) are the caller's.

What it does not do: multi-turn episodes (the agent's environment does those), or judge
anything but the evaluator's verdict (no format reward, no partial credit).
"""

from __future__ import annotations

import ast
import re
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.policy import parse_policy
from cuda_agent.core.pyparse import parse_module
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum import POLICIES, TASKS
from cuda_agent.rl.curriculum.families import (
    FAMILIES,
    FILL_IN_FAMILIES,
    family_of,
    forward_expression,
    launch_name,
    spec_family,
    supports,
)
from cuda_agent.rl.curriculum.kernel_prompts import (  # noqa: F401 (the rung's names, public)
    KERNEL_EXAMPLE_TORCH,
    KERNEL_EXAMPLES,
    KERNEL_SYSTEM,
    kernel_prompt,
)
from cuda_agent.rl.curriculum.scaffold import (
    KERNEL_PRELUDES,
    SIGNATURES,
    write_scaffold,
    write_workdir,
)
from cuda_agent.rl.reply import extract_solution
from cuda_agent.solutions.loader import load_solution

NO_ANSWER_REWARD = -1.0
MAX_EXPRESSION_CHARS = 600
MAX_KERNEL_CHARS = 8000
BUILD_STAGES = ("static", "build", "load")
OUTCOMES = ("format", "build", "wrong", "pass")

MODEL_NEW_SYSTEM = """\
You rewrite PyTorch modules. Given class Model, reply with class ModelNew(nn.Module): the \
same __init__ and forward, computing the same output (torch, nn and F are imported). Reply \
with the class in one ```python code block."""

FILL_IN_SYSTEM = """\
Your reply becomes the expression in this {lang} kernel function: {signature} {{ return \
EXPRESSION; }}. You translate PyTorch elementwise expressions of a float x into C expressions \
(C math functions: fmaxf, fminf, fabsf, expf, tanhf, sinf, cosf, erff, log1pf). Reply with \
the C expression only."""

# One-shot and two-shot examples: ops that are not in the curriculum (exp, log1p), so an
# example is never the answer to a problem.
MODEL_NEW_EXAMPLE = "torch.exp(x) - 1.0"
FILL_IN_EXAMPLES = (
    ("torch.exp(x) - 1.0", "expf(x) - 1.0f"),
    ("torch.log1p(torch.abs(x)) * 4.0", "log1pf(fabsf(x)) * 4.0f"),
)
CLASS_TEMPLATE = """\
class {name}(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {expression}
"""

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_FORBIDDEN = re.compile(r"[;{}#\n]|//|/\*")


class TaskError(CudaAgentError):
    """A curriculum task or problem that cannot be used."""


@dataclass
class Score:
    reward: float
    answer: str | None  # what was read from the reply (None: nothing usable)
    result: EvalResult | None  # the evaluation (None when there was no answer)

    @property
    def correct(self) -> bool:
        return bool(self.result is not None and self.result.correct)


def check_task(task: str) -> str:
    if task not in TASKS:
        raise TaskError(f"curriculum task {task!r}: choose from {', '.join(TASKS)}")
    return task


def torch_expression(problem: Problem) -> str:
    """What the problem's ``Model.forward`` returns (its one ``return`` line)."""
    try:
        return forward_expression(problem.source)
    except CudaAgentError:
        raise TaskError(f"{problem.id}: not a curriculum problem (no return x ...)") from None


def check_supported(task: str, family: str, problem_id: str) -> None:
    """A ``TaskError`` unless problems of ``family`` have ``task``."""
    if not supports(task, family):
        raise TaskError(
            f"{problem_id}: the {task} task is for {' and '.join(FILL_IN_FAMILIES)} problems, "
            f"not {family} ones (keep the rows for which families.supports(task, family))"
        )


def model_class_source(source: str) -> str:
    """The text of the ``Model`` class of a problem file."""
    tree = parse_module(source)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            segment = ast.get_source_segment(source, node)
            if segment:
                return segment + "\n"
    raise TaskError("the problem has no class Model")


def import_lines(source: str) -> str:
    """The import statements of a problem file (what a model-new reply is put after)."""
    tree = parse_module(source)
    lines = [
        ast.get_source_segment(source, node) or ""
        for node in tree.body
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    return "\n".join(line for line in lines if line) + "\n"


def messages(task: str, problem: Problem, backend: str) -> list[dict[str, str]]:
    """The chat prompt of ``task`` for ``problem``: a system turn, the examples as earlier
    turns, and the problem."""
    family = family_of(problem.id)
    check_supported(check_task(task), family, problem.id)
    if task == "kernel":
        system, example, code = kernel_prompt(family, backend)
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": f"y = {example}"},
            {"role": "assistant", "content": kernel_reply(code, backend)},
            {"role": "user", "content": f"y = {torch_expression(problem)}"},
        ]
    if check_task(task) == "model-new":
        example = CLASS_TEMPLATE.format(name="Model", expression=MODEL_NEW_EXAMPLE)
        answer = CLASS_TEMPLATE.format(name="ModelNew", expression=MODEL_NEW_EXAMPLE)
        return [
            {"role": "system", "content": MODEL_NEW_SYSTEM},
            {"role": "user", "content": f"```python\n{example}```"},
            {"role": "assistant", "content": f"```python\n{answer}```"},
            {"role": "user", "content": f"```python\n{model_class_source(problem.source)}```"},
        ]
    lang = "CUDA" if backend == "cuda" else "C++"
    system = FILL_IN_SYSTEM.format(lang=lang, signature=SIGNATURES[backend])
    out = [{"role": "system", "content": system}]
    for question, answer in FILL_IN_EXAMPLES:
        out += [
            {"role": "user", "content": f"y = {question}"},
            {"role": "assistant", "content": answer},
        ]
    out.append({"role": "user", "content": f"y = {torch_expression(problem)}"})
    return out


def kernel_reply(code: str, backend: str) -> str:
    """A kernel-task reply in the form the prompt's worked example shows: one fenced block."""
    fence = "cuda" if backend == "cuda" else "cpp"
    return f"```{fence}\n{code}```"


def extract_expression(reply: str) -> str | None:
    """The C expression in a fill-in reply (see the module docstring), or None."""
    blocks = _FENCE.findall(reply)
    lines = [line for line in (blocks[-1] if blocks else reply).splitlines() if line.strip()]
    text = lines[0].strip() if lines else ""
    text = re.sub(r"^return\s+", "", text)
    text = re.sub(r"^(float\s+)?y\s*=\s*", "", text)
    text = text.removesuffix(";").strip()
    if not text or len(text) > MAX_EXPRESSION_CHARS or _FORBIDDEN.search(text):
        return None
    return text


def extract_kernel(reply: str, family: str | None = None) -> str | None:
    """The kernel code of a kernel-task reply: the last fenced block, if it defines the
    family's launch (``elementwise_launch``, ``rowwise_launch``, ``reduce_launch``; with no
    family, any of them: ``score_reply`` knows the problem and checks its own); else None (a
    format failure)."""
    blocks = _FENCE.findall(reply)
    if not blocks:
        return None
    code = blocks[-1].strip()
    names = {launch_name(f) for f in ([family] if family else FAMILIES)}
    if not any(name in code for name in names) or len(code) > MAX_KERNEL_CHARS:
        return None
    return code + "\n"


def extract_answer(task: str, reply: str, family: str | None = None) -> str | None:
    task = check_task(task)
    if task == "model-new":
        return extract_solution(reply)
    if task == "kernel":
        return extract_kernel(reply, family)
    return extract_expression(reply)


def outcome(score: Score) -> str:
    """What became of a reply (``OUTCOMES``): no answer in it (``format``), an answer that did
    not build or load (``build``), one the evaluator rejected (``wrong``: wrong output, an
    integrity flag, a crash), or ``pass``."""
    if score.answer is None:
        return "format"
    if score.correct:
        return "pass"
    error = score.result.error if score.result is not None else None
    return "build" if error is not None and error.stage in BUILD_STAGES else "wrong"


def write_answer(
    task: str, problem: Problem, problem_spec: str, backend: str, folder: Path, answer: str
) -> Path:
    """The solution ``answer`` (read from a reply to ``task``) makes, written under ``folder``:
    a KernelBench single file (model-new) or a scaffolded workdir (fill-in, kernel)."""
    if check_task(task) == "model-new":
        path = folder / "solution.py"
        path.write_text(f"{import_lines(problem.source)}\n\n{answer}", encoding="utf-8")
        return path
    family = family_of(problem.id)
    check_supported(task, family, problem.id)
    if task == "kernel":
        kernel = f"{KERNEL_PRELUDES[backend]}\n{answer}"
        return write_workdir(problem, problem_spec, backend, folder / "workdir", kernel, family)
    return write_scaffold(problem, problem_spec, backend, folder / "workdir", answer)


def score_reply(
    task: str,
    problem_spec: str,
    reply: str,
    backend: str,
    options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    size: str = "standard",
) -> Score:
    """The reward of ``reply`` to ``task`` on the problem (see the module docstring); a
    ``TaskError`` for a task the problem's family does not have."""
    family = spec_family(problem_spec)
    check_supported(check_task(task), family, problem_spec)
    answer = extract_answer(task, reply, family)
    if answer is None:
        return Score(NO_ANSWER_REWARD, None, None)
    problem = resolve_problem(problem_spec, size)
    chosen = replace(
        options or EvalOptions(), backend=backend, policy=parse_policy(POLICIES[task])
    ).validate()
    folder = Path(tempfile.mkdtemp(prefix="ca-curriculum-"))
    try:
        path = write_answer(task, problem, problem_spec, backend, folder, answer)
        result = evaluator(problem, load_solution(path), chosen)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return Score(float(result.reward), answer, result)
