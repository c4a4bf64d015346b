"""``cuda-agent problems list|check``: browse problem sets and validate problem files."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from cuda_agent.cli.common import (
    fail,
    one_line_errors,
    out_console,
    parse_levels,
    print_json,
    resolve_backend,
    resolve_size,
)
from cuda_agent.core.errors import ProblemError
from cuda_agent.evaluator.problem_check import check_problem_runtime
from cuda_agent.problems.sets import load_problem_set, resolve_problem

app = typer.Typer(help="List and check problem sets.", no_args_is_help=True)


@app.command("list")
@one_line_errors
def list_command(
    set_: str = typer.Option(
        "bundled", "--set", help="'bundled', a KernelBench checkout, or a folder."
    ),
    levels: str | None = typer.Option(None, help="Only these levels, e.g. 1,2."),
    size: str = typer.Option("standard", help="small or standard (bundled problems only)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """List the problems of a set."""
    problems = load_problem_set(set_, parse_levels(levels), resolve_size(size, "cuda"))
    if as_json:
        print_json([p.summary() for p in problems])
        return
    table = Table(title=f"{len(problems)} problems ({set_})")
    for column in ("id", "level", "tags", "description"):
        table.add_column(column)
    for p in problems:
        table.add_row(p.id, str(p.level or "-"), ", ".join(p.tags), p.description)
    out_console.print(table)


@app.command("check")
@one_line_errors
def check_command(
    path: str = typer.Argument(..., help="A problem file (or a bundled id)."),
    backend: str = typer.Option("cpu", help="Where to run it: cpu, cuda or auto."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON object."),
) -> None:
    """Load PATH, run it once and summarise it; exit 2 with one line if it is broken."""
    chosen = resolve_backend(backend)
    if not Path(path).exists() and path.endswith(".py"):
        raise ProblemError(f"{path}: no such file")
    problem = resolve_problem(path, resolve_size(size, chosen))
    report = check_problem_runtime(problem, chosen)
    if as_json:
        print_json({"id": problem.id, "hash": problem.content_hash, **report})
        if not report.get("ok"):
            raise typer.Exit(2)
        return
    if not report.get("ok"):
        raise fail(f"{path}: {report.get('error')}")
    warnings = report.get("warnings") or []
    note = f"; warnings: {'; '.join(warnings)}" if warnings else ""
    out_console.print(
        f"ok: {problem.id} (level {problem.level or '-'}): inputs {report['inputs']} -> "
        f"outputs {report['outputs']}, {report['parameters']} parameters, forward "
        f"{report['forward_ms']} ms on {chosen}{note}"
    )
