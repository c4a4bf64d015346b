"""``cuda-agent demo``: the README's main job. A replayed agent solves a bundled problem.

The model's turns come from a recorded script (``agent.replays``), served by a local HTTP
server that speaks the OpenAI chat-completions API; everything else is real: the client, the
ReAct loop, the sandboxed shell and file tools, the workspace commands served by the harness,
the evaluator and the reward. The output says so, and how to plug in a real model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from cuda_agent.agent.models import OpenAIChatModel
from cuda_agent.agent.replay_server import ReplayServer
from cuda_agent.agent.replays import DEMO_PROBLEM, demo_script
from cuda_agent.cli.common import (
    err_console,
    one_line_errors,
    out_console,
    print_command_line,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.episode_follow import follow_episode
from cuda_agent.cli.episode_view import render_episode
from cuda_agent.cli.progress_log import Status
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rollout import EpisodeConfig, run_episode

EXPLANATION = (
    "This demo REPLAYS a recorded agent session: the model's turns are scripted and served by "
    "a local OpenAI-compatible endpoint. Everything else is real: the client, the ReAct loop, "
    "the sandboxed tools, the evaluator and the reward. To run a real model:"
)
REAL_MODEL_COMMAND = (
    "  cuda-agent solve {problem} --model NAME --base-url http://HOST:PORT/v1 --out runs/x"
)


@one_line_errors
def demo_command(
    backend: str = typer.Option("auto", help="cpu, cuda, or auto (cuda when a GPU is visible)."),
    out: Path | None = typer.Option(
        None, help="Run folder to keep (default: a temporary one, removed at the end)."
    ),
) -> None:
    """Watch a (replayed) agent write, fix, verify and profile a kernel for a bundled problem."""
    chosen = resolve_backend(backend)
    problem = resolve_problem(DEMO_PROBLEM, resolve_size("auto", chosen))
    err_console.print(EXPLANATION)
    print_command_line(err_console, REAL_MODEL_COMMAND.format(problem=DEMO_PROBLEM))
    if out is not None:
        reward = run_demo(problem, chosen, out, kept=True)
    else:  # a temporary run folder: removed once the result is shown
        with tempfile.TemporaryDirectory(prefix="cuda-agent-demo-") as folder:
            reward = run_demo(problem, chosen, Path(folder), kept=False)
    if reward < 1:
        raise typer.Exit(1)


def run_demo(problem: Problem, backend: str, run_dir: Path, kept: bool) -> float:
    """Run the replayed episode in ``run_dir``, show it, and return its reward."""
    config = EpisodeConfig(
        backend=backend, eval_options=EvalOptions(backend=backend, keep_spare_worker=True)
    )
    with ReplayServer(demo_script(backend)) as server:
        model = OpenAIChatModel("replay", server.base_url, "unused", max_retries=2, backoff_s=0.2)
        status = Status("demo", f"agent (replayed) working on {problem.id}, {backend} backend")
        with status, follow_episode(run_dir / "trajectory.jsonl", status):
            episode = run_episode(problem, DEMO_PROBLEM, model, run_dir, config)
    render_episode(out_console, run_dir / "trajectory.jsonl", episode, kept=kept)
    return episode.reward
