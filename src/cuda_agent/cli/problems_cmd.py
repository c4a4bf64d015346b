"""``cuda-agent problems list|check|lint``: browse problem sets and validate problem files."""

from __future__ import annotations

import json
from concurrent.futures import as_completed
from pathlib import Path

import typer
from rich.table import Table

from cuda_agent.cli.common import (
    fail,
    one_line_errors,
    out_console,
    parse_levels,
    print_json,
    require_positive,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.pools import make_pool
from cuda_agent.cli.progress_log import Reporter
from cuda_agent.cluster.board import JobBoard
from cuda_agent.core.errors import CudaAgentError, ProblemError
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.checks.problem_runtime import (
    check_problem_runtime,
    check_record,
    check_request,
    report_json,
)
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
    fail_on_lint: bool = typer.Option(False, help="Exit 1 when the lint finds anything."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON object."),
) -> None:
    """Run PATH, summarise it and lint it; exit 2 with one line if it is broken."""
    chosen = resolve_backend(backend)
    if not Path(path).exists() and path.endswith(".py"):
        raise ProblemError(f"{path}: no such file")
    problem = resolve_problem(path, resolve_size(size, chosen))
    report = check_problem_runtime(problem, chosen)
    if as_json:
        print_json({"id": problem.id, "hash": problem.content_hash, **report_json(report)})
    elif report.ok:
        findings, notes = report.lint, report.warnings
        out_console.print(
            f"ok: {problem.id} (level {problem.level or '-'}): inputs {report.inputs} -> "
            f"outputs {report.outputs}, {report.parameters} parameters, forward "
            f"{report.forward_ms} ms on {chosen}"
            + (f"; lint: {', '.join(findings)}" if findings else "; lint: clean")
            + (f"; warnings: {'; '.join(notes)}" if notes else "")
        )
    if not report.ok:
        if as_json:
            raise typer.Exit(2)
        raise fail(f"{path}: {report.message}")
    if fail_on_lint and report.lint:
        raise typer.Exit(1)


def _out_of_memory(entry: dict[str, object]) -> bool:
    return "out of memory" in str(entry.get("error")).lower()


def _previous_findings(out: Path, wanted: set[str]) -> dict[str, dict[str, object]]:
    """The entries of an earlier report worth keeping: this set's, not lost to memory."""
    if not out.exists():
        return {}
    try:
        previous = json.loads(out.read_text())
    except (OSError, ValueError) as err:
        raise CudaAgentError(f"{out}: not a lint report ({err})") from None
    if not isinstance(previous, dict):
        raise CudaAgentError(f"{out}: not a lint report (expected a JSON object)")
    return {
        pid: entry
        for pid, entry in previous.items()
        if pid in wanted and isinstance(entry, dict) and not _out_of_memory(entry)
    }


@app.command("lint")
@one_line_errors
def lint_command(
    set_: str = typer.Option("bundled", "--set", help="'bundled', a KernelBench checkout, ..."),
    levels: str | None = typer.Option(None, help="Only these levels, e.g. 1,2,3."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    timeout: float = typer.Option(600.0, help="Seconds per problem."),
    out: Path | None = typer.Option(None, help="Write the full report (JSON) here."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    workers: int | None = typer.Option(None, help="Devices (default: every GPU)."),
    worker_slots: int = typer.Option(1, help="Problems checked at once on each device."),
    resume: bool = typer.Option(
        False, help="Keep the findings already in --out (not out-of-memory ones); check the rest."
    ),
) -> None:
    """Lint a whole problem set for degenerate or broken problems (on the evaluation pool).

    With several problems per device, one that runs out of device memory is checked again
    alone afterwards, so a crowded GPU never makes a problem look broken. The report is
    rewritten after every problem, so an interrupted run loses nothing with ``--resume``.
    """
    require_positive(timeout=timeout, workers=workers, worker_slots=worker_slots)
    chosen = resolve_backend(backend)
    problems = load_problem_set(set_, parse_levels(levels), resolve_size(size, chosen))
    report: dict[str, dict[str, object]] = {}
    if resume:
        if out is None:
            raise CudaAgentError("--resume needs --out (the report to continue)")
        report = _previous_findings(out, {p.id for p in problems})
    todo = [p for p in problems if p.id not in report]
    board = JobBoard()
    with Reporter("lint", len(problems), board, done=len(report)) as reporter:

        def lint_all(batch: list[Problem], slots: int) -> None:
            with make_pool(chosen, workers, None, slots) as pool:
                pool.attach_board(board)  # one board across both passes
                futures = {pool.submit_worker(check_request(p, chosen), timeout): p for p in batch}
                for future in as_completed(futures):
                    problem = futures[future]
                    task_result = future.result()
                    result = check_record(task_result.record, task_result.error)
                    report[problem.id] = {
                        "ok": result.ok,
                        "lint": result.lint,
                        "error": result.message or None,
                        "forward_ms": result.forward_ms,
                        "path": str(problem.path),
                    }
                    findings = ", ".join(result.lint)
                    state = "broken" if not result.ok else (findings or "clean")
                    reporter.finished(f"{problem.id}: {state}", problem.id)
                    if out is not None:
                        out.write_text(json.dumps(report, indent=1))

        lint_all(todo, worker_slots)
        crowded = [p for p in todo if _out_of_memory(report[p.id])]
        if crowded and worker_slots > 1:
            for problem in crowded:
                del report[problem.id]
            lint_all(crowded, 1)
    report = {p.id: report[p.id] for p in problems}
    if out is not None:
        out.write_text(json.dumps(report, indent=1))
    if as_json:
        print_json(report)
        return
    flagged = {k: v for k, v in report.items() if v["lint"] or not v["ok"]}
    table = Table(title=f"{len(flagged)} of {len(report)} problems flagged ({set_})")
    table.add_column("problem")
    table.add_column("finding")
    for pid, entry in flagged.items():
        lint = entry["lint"]
        finding = ", ".join(lint) if isinstance(lint, list) and lint else f"error: {entry['error']}"
        table.add_row(pid, finding)
    out_console.print(table)
