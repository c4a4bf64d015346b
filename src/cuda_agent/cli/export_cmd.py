"""``cuda-agent export SOLUTION --problem PROBLEM --out DIR``: a verified solution as a package."""

from __future__ import annotations

from pathlib import Path

import typer

from cuda_agent.bench.records import chosen_attempts, read_records
from cuda_agent.cli.common import (
    err_console,
    one_line_errors,
    out_console,
    parse_csv,
    resolve_backend,
    resolve_size,
)
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.policy import DEFAULT_POLICY, Policy
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.export import (
    ExportItem,
    ExportOutcome,
    export_many,
    export_solution,
    package_name,
    resolve_solution_path,
)
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution


@one_line_errors
def export_command(
    solution: Path = typer.Argument(..., help="A .py file with ModelNew, a workdir, or best/."),
    problem: str = typer.Option(..., "--problem", help="A bundled problem id or a problem file."),
    out: Path = typer.Option(..., "--out", help="New folder for the project (pip installable)."),
    name: str | None = typer.Option(None, help="Package name (default: from the problem id)."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto (cuda when a GPU is visible)."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager | ''."),
    policy: Policy = typer.Option(
        DEFAULT_POLICY, help="strict (paper rules), kernelbench, or off."
    ),
    precision: str = typer.Option("ieee", help="ieee (true fp32), tf32, or torch-default."),
    timeout: float = typer.Option(600.0, help="Hard limit in seconds per evaluation process."),
) -> None:
    """Evaluate SOLUTION (with --shapes); if correct, write an installable package to OUT."""
    opts = EvalOptions(  # validated before anything is loaded; the backend is set next
        baselines=parse_csv(baselines),
        policy=policy,
        precision=precision,
        worker_timeout_s=timeout,
    ).validate()
    chosen = resolve_backend(backend)
    opts.backend = chosen
    prob = resolve_problem(problem, resolve_size(size, chosen))
    sol = load_solution(resolve_solution_path(solution))
    with err_console.status(f"exporting {sol.path.name} for {prob.id} ({chosen})") as status:

        def progress(stage: str, text: str) -> None:
            status.update(f"[bold]{stage}[/]: {text} ({prob.id}, {chosen})")

        outcome = export_solution(prob, sol, out, opts, name, progress)
    report(outcome)


def export_run_best(run_dir: Path, problems: list[Problem], opts: EvalOptions, out: Path) -> None:
    """``bench run --export-best OUT``: the run's best correct solution of every problem, as
    one package named after OUT with a module per problem (evaluated again, with shapes, where
    the run's evaluation did not check them)."""
    by_id = {p.id: p for p in problems}
    items = []
    for pid, record in sorted(chosen_attempts(read_records(run_dir)).items()):
        if not record.correct or pid not in by_id or not record.solution:
            continue
        path = Path(record.solution)
        if not path.is_absolute() and (run_dir / path).exists():
            path = run_dir / path
        items.append(
            ExportItem(by_id[pid], load_solution(resolve_solution_path(path)), record.result)
        )
    if not items:
        raise CudaAgentError(f"--export-best: no correct solution in {run_dir}; nothing exported")
    with err_console.status(f"exporting {len(items)} solution(s)") as status:

        def progress(stage: str, text: str) -> None:
            status.update(f"[bold]export[/] {stage}: {text}")

        outcome = export_many(items, out, package_name(out.name), opts, progress)
    report(outcome)


def report(outcome: ExportOutcome) -> None:
    """What was written, what each module verified, how to install it."""
    for pid, module in outcome.modules.items():
        result = outcome.results[pid]
        shapes = result.details.shapes or []
        passed = sum(1 for s in shapes if s["verdict"] == "pass")
        failed = [s["label"] for s in shapes if s["verdict"] == "fail"]
        general = {True: "yes", False: "no", None: "unknown"}[result.generalizes]
        # the module's name, and the problem's where the two differ (not "relu: relu")
        name = module if module.rsplit(".", 1)[-1] == pid else f"{module} (problem {pid})"
        line = f"{name}: {passed} size(s) verified, generalizes: {general}"
        out_console.print(line + (f" (failed: {', '.join(failed)})" if failed else ""))
    for pid, why in outcome.skipped.items():
        err_console.print(f"skipped {pid}: {why}")
    out_console.print(
        f"wrote {outcome.out}; install: pip install --no-build-isolation {outcome.out}"
    )
