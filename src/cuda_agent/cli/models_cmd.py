"""``cuda-agent models check|path``: preflight an endpoint; resolve a model to a local folder."""

from __future__ import annotations

import os

import typer
from rich.markup import escape

from cuda_agent.agent.preflight import check_endpoint
from cuda_agent.cli.common import one_line_errors, out_console, print_json, require_http_url
from cuda_agent.core.errors import CudaAgentError

app = typer.Typer(help="Check a model endpoint; resolve a model to a folder.", no_args_is_help=True)

MARKS = {True: "[green]ok[/]", False: "[red]FAIL[/]", None: "[dim]--[/]"}


@app.command("check")
@one_line_errors
def check_command(
    base_url: str = typer.Option(..., "--base-url", help="e.g. http://HOST:8000/v1"),
    model: str = typer.Option(..., "--model", help="Model name at the endpoint."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Variable holding the API key."),
    probe_tokens: int = typer.Option(
        512, help="Completion budget of each probe (reasoning models need room to think)."
    ),
    timeout: float = typer.Option(60.0, help="Seconds per request."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """A few small requests: is the endpoint usable by the agent, and how (exit 0 usable, 2
    not)."""
    if probe_tokens < 1:
        raise CudaAgentError("--probe-tokens must be at least 1")
    require_http_url("--base-url", base_url)
    report = check_endpoint(base_url, model, os.environ.get(api_key_env, ""), probe_tokens, timeout)
    if as_json:
        print_json(report.to_dict())
    else:
        for finding in report.findings:
            out_console.print(
                f"{MARKS[finding.ok]} {finding.step:<11} {escape(finding.text)}",
                markup=True,
                highlight=False,
                soft_wrap=True,
            )
            if finding.fix:
                out_console.print(f"{'':<16}fix: {finding.fix}", markup=False, soft_wrap=True)
        if report.usable:
            out_console.print(f"usable: {report.command()}", markup=False, soft_wrap=True)
        else:
            out_console.print("not usable by the agent (see the failures above)", markup=False)
    raise typer.Exit(0 if report.usable else 2)


@app.command("path")
@one_line_errors
def path_command(
    model: str = typer.Argument(
        ...,
        help="'tiny', 'smollm2', 'qwen-coder-0.5b', 'qwen-coder-1.5b', a local folder, or a "
        "Hugging Face model id.",
    ),
) -> None:
    """The local folder of MODEL ('tiny' is built; 'smollm2' and 'qwen-coder-*' are converted
    from the GGUF of their installed packages, checked by SHA-256, into the cache on first
    use); fails in seconds when it is neither local nor reachable."""
    from cuda_agent.rl.models.path import resolve_model_path

    typer.echo(resolve_model_path(model, check_hub=True))
