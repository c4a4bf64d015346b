"""``cuda-agent examples``: evaluate the bundled example solutions and print a results table.

Exercises the whole evaluation pipeline (static check, build, verification, interleaved timing,
torch.compile baseline, reward) on solutions written by hand, without an agent.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from rich import box
from rich.status import Status
from rich.table import Table

from cuda_agent.cli.common import (
    err_console,
    one_line_errors,
    out_console,
    parse_csv,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.render import verdict_text
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import fmt_us, fmt_x
from cuda_agent.examples import example_solutions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution


@one_line_errors
def examples_command(
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager"),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
) -> None:
    """Evaluate every bundled example solution for the backend and show the results."""
    chosen = resolve_backend(backend)
    examples = example_solutions(chosen)
    results: list[tuple[str, EvalResult]] = []
    options = EvalOptions(backend=chosen, baselines=parse_csv(baselines)).validate()
    for i, (problem_id, path) in enumerate(examples, 1):
        problem = resolve_problem(problem_id, resolve_size(size, chosen))
        solution = load_solution(path)
        shape = "workdir" if path.is_dir() else "single file"
        tag = f"[{i}/{len(examples)}] {problem_id}"
        with err_console.status(f"{tag} ({shape})") as status:
            result = evaluate(problem, solution, options, progress=_status_updater(status, tag))
        results.append((shape, result))
        err_console.print(f"{tag}: reward {result.reward:g}")
    table = Table(
        title=f"bundled example solutions, {chosen} backend",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in ("problem", "solution", "verdict", "runtime", "x eager", "x compile", "reward"):
        table.add_column(column, no_wrap=True)
    for shape, r in results:
        row = (
            r.problem_id,
            "workdir" if shape == "workdir" else "file",
            verdict_text(r),
            fmt_us(r.runtime_us),
            fmt_x(r.speedup_eager),
            fmt_x(r.speedup_compile),
            f"{r.reward:g}",
        )
        table.add_row(*row)
    out_console.print(table)
    failed = [r for _, r in results if r.error is not None]
    for r in failed:
        err_console.print(
            f"{r.problem_id}: {r.error.stage if r.error else ''}: "
            f"{r.error.message if r.error else ''}"
        )
    if failed:
        raise typer.Exit(1)


def _status_updater(status: Status, tag: str) -> Callable[[str, str], None]:
    def update(stage: str, text: str) -> None:
        status.update(f"{tag}: {text}")

    return update
