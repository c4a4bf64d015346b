"""``cuda-agent tool compile|verify|profile``: the workspace commands an agent runs in its workdir.

Run by hand they evaluate locally (through ``cuda-agent serve`` when it runs). Inside an
agent's sandbox (``CUDA_AGENT_TOOL_SOCKET`` set)
``cli.app.main`` hands them to ``workspace.tool_client`` before this module is even imported,
so the evaluation runs in the harness, outside the sandbox. Exit status: 0 on success, 1 when
the candidate fails.
"""

from __future__ import annotations

from pathlib import Path

import typer

from cuda_agent.cli.common import one_line_errors, parse_csv
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.service import evaluate_remote
from cuda_agent.evaluator.workspace_commands import run_tool
from cuda_agent.workspace.init import read_metadata

app = typer.Typer(help="Workspace commands (run inside a workdir).", no_args_is_help=True)


def _evaluate(problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
    """Through `cuda-agent serve` when it runs (warm workers), else in this process."""
    return evaluate_remote(problem, solution, options) or evaluate(problem, solution, options)


@app.command("compile")
@one_line_errors
def compile_command(directory: Path = typer.Argument(Path("."), help="The workdir.")) -> None:
    """Build cuda_extension from kernels/ and print the first errors."""
    _reply("compile", directory)


@app.command("verify")
@one_line_errors
def verify_command(
    directory: Path = typer.Argument(Path("."), help="The workdir."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager | ''"),
) -> None:
    """Build, check correctness and the rules on fresh inputs, and time against the baselines."""
    backend = read_metadata(directory)["backend"]
    _reply("verify", directory, EvalOptions(backend=backend, baselines=parse_csv(baselines)))


@app.command("profile")
@one_line_errors
def profile_command(directory: Path = typer.Argument(Path("."), help="The workdir.")) -> None:
    """Timing detail, per-kernel tables (cuda) and ncu metrics for your kernels."""
    _reply("profile", directory)


def _reply(command: str, directory: Path, options: EvalOptions | None = None) -> None:
    reply = run_tool(command, directory, options, evaluator=_evaluate)
    typer.echo(reply.text)
    if reply.exit_code:
        raise typer.Exit(reply.exit_code)
