"""``cuda-agent workspace init PROBLEM DIR``: create an agent workdir from the template."""

from __future__ import annotations

from pathlib import Path

import typer

from cuda_agent.cli.common import one_line_errors, out_console, resolve_backend, resolve_size
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.workspace.init import init_workspace

app = typer.Typer(help="Create kernel workspaces for agents (or people).", no_args_is_help=True)


@app.command("init")
@one_line_errors
def init_command(
    problem: str = typer.Argument(..., help="A bundled problem id or a problem file."),
    directory: Path = typer.Argument(..., help="Folder to create (must be empty or new)."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    force: bool = typer.Option(False, help="Write into a non-empty folder."),
    language: str = typer.Option("cuda", help="cuda (C++/CUDA kernels) or triton."),
) -> None:
    """Create a workdir: SKILL.md, model.py, model_new.py, kernels/ (and, for cuda, the
    binding files)."""
    chosen = resolve_backend(backend, need_device=False)
    prob = resolve_problem(problem, resolve_size(size, chosen))
    spec = problem if not Path(problem).exists() else str(Path(problem).resolve())
    path = init_workspace(prob, directory, chosen, spec, force=force, language=language)
    out_console.print(
        f"created {path} for {prob.id} ({chosen}, {prob.size} size); "
        f"read {path / 'SKILL.md'} to start"
    )
