"""The ``cuda-agent`` command line (typer + rich). Nothing in the package imports ``cli``."""

from __future__ import annotations

import os
import sys

import typer

try:  # typer vendors click since 0.2x: its parser raises its own copies of click's errors
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - an older typer on the real click
    import click.exceptions as click_errors  # type: ignore[no-redef]

from cuda_agent.cli import (
    bench_cmd,
    cache_cmd,
    models_cmd,
    problems_cmd,
    tool_cmd,
    workspace_cmd,
)
from cuda_agent.cli.demo_cmd import demo_command
from cuda_agent.cli.diagnostics import install_diagnostics
from cuda_agent.cli.eval_cmd import eval_command
from cuda_agent.cli.examples_cmd import examples_command
from cuda_agent.cli.export_cmd import export_command
from cuda_agent.cli.help_text import hide_flag_types, tidy_commands
from cuda_agent.cli.serve_cmd import serve_command
from cuda_agent.cli.solve_cmd import solve_command
from cuda_agent.cli.synth_cmd import synth_command
from cuda_agent.cli.train_cmd import train_command
from cuda_agent.core.version import __version__
from cuda_agent.workspace.isolation import ALLOW_UNSANDBOXED_ENV
from cuda_agent.workspace.tool_client import forward, wants_forwarding

ALLOW_FLAG = "--allow-unsandboxed"

app = typer.Typer(
    name="cuda-agent",
    help="Agents that write fast, correct CUDA kernels: problems, evaluation, workspaces.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(problems_cmd.app, name="problems")
app.add_typer(workspace_cmd.app, name="workspace")
app.add_typer(tool_cmd.app, name="tool")
app.add_typer(bench_cmd.app, name="bench")
app.add_typer(models_cmd.app, name="models")
app.add_typer(cache_cmd.app, name="cache")
app.command("eval")(eval_command)
app.command("solve")(solve_command)
app.command("demo")(demo_command)
app.command("examples")(examples_command)
app.command("export")(export_command)
app.command("synth")(synth_command)
app.command("train")(train_command)
app.command("serve")(serve_command)
tidy_commands(app)
hide_flag_types()


def _version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    allow_unsandboxed: bool = typer.Option(
        False,
        "--allow-unsandboxed",
        help="Where no isolation is available (no bubblewrap, no Landlock, not root), run "
        "candidate code anyway; every result then says isolation: none. Accepted anywhere on "
        "the command line.",
    ),
) -> None:
    """CUDA Agent."""


def main() -> None:
    if wants_forwarding(sys.argv[1:]):  # inside an agent's sandbox: the harness evaluates
        sys.exit(forward(sys.argv[1:]))
    if ALLOW_FLAG in sys.argv[1:]:  # a flag of every command that runs candidate code
        sys.argv = [sys.argv[0], *(a for a in sys.argv[1:] if a != ALLOW_FLAG)]
        os.environ[ALLOW_UNSANDBOXED_ENV] = "1"
    install_diagnostics()
    from cuda_agent.evaluator.launch.worker_spawn import kill_workers_on_termination

    kill_workers_on_termination()
    sys.exit(run_app())


def run_app(args: list[str] | None = None) -> int:
    """``app`` with click's own error display replaced: an unusable option value, an unknown
    option or a missing argument is one ``error:`` line on stderr and exit status 2, like every
    other refusal of the command line (click draws a box of several lines). Returns the exit
    status."""
    try:
        status = app(args=args, standalone_mode=False)
    except click_errors.NoArgsIsHelpError as err:  # the bare command: its help
        err.show()
        return err.exit_code
    except click_errors.UsageError as err:
        command = err.ctx.command_path if err.ctx is not None else "cuda-agent"
        message = " ".join(err.format_message().split())
        sys.stderr.write(f"error: {message} (see {command} --help)\n")
        return 2
    except click_errors.ClickException as err:
        sys.stderr.write(f"error: {' '.join(err.format_message().split())}\n")
        return err.exit_code
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 1
    return status if isinstance(status, int) else 0


if __name__ == "__main__":
    main()
