"""``cuda-agent solve PROBLEM``: run the agent on one problem, with any OpenAI-compatible model."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import typer

from cuda_agent.agent.loop import AgentLimits
from cuda_agent.agent.models import (
    DEFAULT_BACKOFF_S,
    DEFAULT_RETRIES,
    TOOL_FORMATS,
    ChatModel,
    OpenAIChatModel,
    ScriptedModel,
)
from cuda_agent.agent.replays import load_script
from cuda_agent.agent.trajectory import read_events
from cuda_agent.cli.common import (
    err_console,
    fail,
    one_line_errors,
    out_console,
    print_json,
    require_http_url,
    require_positive,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.episode_follow import follow_episode
from cuda_agent.cli.episode_view import render_episode
from cuda_agent.cli.progress_log import Status
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rollout import EpisodeConfig, run_episode

EXIT_MODEL = 3  # the episode ended because the model endpoint failed (its cause on stderr)


@dataclass(frozen=True)
class Retries:
    """How a transient endpoint failure is retried: ``count`` times, waiting ``backoff_s``
    before the first retry and twice the last wait before each later one."""

    count: int = DEFAULT_RETRIES  # the client's own defaults (agent/models.py)
    backoff_s: float = DEFAULT_BACKOFF_S


@one_line_errors
def solve_command(
    problem: str = typer.Argument(..., help="A bundled problem id or a problem file."),
    out: Path = typer.Option(..., "--out", help="Run folder (trajectory, result, best/)."),
    model: str = typer.Option("", help="Model name at the endpoint."),
    base_url: str = typer.Option("", help="OpenAI-compatible base URL, e.g. http://host:8000/v1"),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Variable holding the API key."),
    tool_format: str = typer.Option(
        "auto", help="auto, native, hermes or json: how tool calls travel (docs/agent.md)."
    ),
    stream: bool = typer.Option(False, "--stream", help="Stream replies (server-sent events)."),
    retries: int = typer.Option(
        Retries.count,
        min=0,
        help="Retries of a transient endpoint failure (unreachable, timeout, 429, 5xx).",
    ),
    retry_backoff: float = typer.Option(
        Retries.backoff_s, min=0.0, help="Seconds before the first retry; each later wait doubles."
    ),
    replay: Path | None = typer.Option(None, help="Replay turns from a script or trajectory."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    max_turns: int = typer.Option(200, help="Turn limit (the paper: 200 eval, 150 train)."),
    context_tokens: int = typer.Option(131072, help="Context-token budget."),
    max_output_tokens: int = typer.Option(16384, help="Output cap per turn."),
    wall_clock: float = typer.Option(6 * 3600.0, help="Wall-clock limit, seconds."),
    resume: bool = typer.Option(False, "--resume", help="Continue the run in --out."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json on stdout."),
    language: str | None = typer.Option(
        None,
        help="The kernels to write: cuda (C++/CUDA) or triton; required at every evaluation "
        "(default: a cuda workspace, any language accepted).",
    ),
) -> None:
    """Run the agent on PROBLEM in a fresh workspace; the harness scores the result (exit 3
    with the cause when the model endpoint failed)."""
    require_positive(
        max_turns=max_turns,
        context_tokens=context_tokens,
        max_output_tokens=max_output_tokens,
        wall_clock=wall_clock,
    )
    chosen = resolve_backend(backend)
    prob = resolve_problem(problem, resolve_size(size, chosen))
    chat = make_model(
        model, base_url, api_key_env, replay, tool_format, stream, Retries(retries, retry_backoff)
    )
    if out.exists() and any(out.iterdir()) and not resume:
        raise CudaAgentError(f"{out}: folder exists and is not empty (use --resume or another)")
    limits = AgentLimits(
        max_turns=max_turns,
        context_tokens=context_tokens,
        max_output_tokens=max_output_tokens,
        wall_clock_s=wall_clock,
    )
    if language not in (None, "cuda", "triton"):
        raise CudaAgentError(f"--language {language!r}: choose from cuda, triton")
    config = EpisodeConfig(
        backend=chosen,
        limits=limits,
        eval_options=EvalOptions(
            backend=chosen, keep_spare_worker=True, language=language
        ).validate(),
        language=language or "cuda",
    )
    spec = problem if not Path(problem).exists() else str(Path(problem).resolve())
    status = Status("solve", f"agent working on {prob.id} ({chosen}) -> {out}")
    with status, follow_episode(out / "trajectory.jsonl", status):
        episode = run_episode(prob, spec, chat, out, config, resume=resume)
    if as_json:
        print_json({"problem": prob.id, **episode.to_dict()})
    else:
        render_episode(out_console, out / "trajectory.jsonl", episode)
    if episode.exit_reason == "model_error":
        cause = exit_detail(out / "trajectory.jsonl") or "no cause recorded"
        raise fail(f"the model endpoint failed: {cause} (episode files in {out})", EXIT_MODEL)


def exit_detail(trajectory: Path) -> str:
    """The detail of the episode's last ``exit`` event (why it ended), or ""."""
    exits = [e for e in read_events(trajectory) if e.get("kind") == "exit"]
    return str(exits[-1].get("detail") or "") if exits else ""


def make_model(
    model: str,
    base_url: str,
    api_key_env: str,
    replay: Path | None,
    tool_format: str = "auto",
    stream: bool = False,
    retries: Retries | None = None,
) -> ChatModel:
    check_tool_format(tool_format)
    if replay is not None:
        if not replay.exists():
            raise CudaAgentError(f"{replay}: no such replay file")
        return ScriptedModel(load_script(replay), name=f"replay:{replay.name}")
    if not model or not base_url:
        raise CudaAgentError(
            "give --model and --base-url (an OpenAI-compatible endpoint), or --replay FILE"
        )
    require_http_url("--base-url", base_url)
    key = os.environ.get(api_key_env, "")
    retries = retries or Retries()
    return OpenAIChatModel(
        model,
        base_url,
        key,
        max_retries=retries.count,
        backoff_s=retries.backoff_s,
        tool_format=tool_format,
        stream=stream,
        on_retry=_say_retry,
    )


def _say_retry(line: str) -> None:
    err_console.print(f"note: {line}", markup=False, highlight=False, soft_wrap=True)


def check_tool_format(tool_format: str) -> str:
    if tool_format not in TOOL_FORMATS:
        raise CudaAgentError(
            f"--tool-format {tool_format!r}: choose from {', '.join(TOOL_FORMATS)}"
        )
    return tool_format
