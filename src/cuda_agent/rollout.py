"""One episode: a workspace, the agent loop in its sandbox, and the harness's own verdicts.

``run_episode`` creates (or resumes) the workdir, serves the workspace commands from outside
the sandbox, runs the ReAct loop, then evaluates the final workdir itself. The reward is the
harness's, never parsed from tool output: the best of the final evaluation and the verified
evaluations made during the episode (the paper reports the best solution of a trajectory).
Everything is recorded in ``trajectory.jsonl`` as it happens; ``result.json`` and ``best/``
are written at the end. bench and rl consume this and nothing below it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.loop import AgentLimits, run_loop
from cuda_agent.agent.models import ChatModel
from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
from cuda_agent.agent.shell import PersistentShell
from cuda_agent.agent.tool_server import ToolServer
from cuda_agent.agent.tools.base import ToolContext
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory, load_messages, read_events
from cuda_agent.core.paths import cache_root
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator, ToolReply
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.init import init_workspace
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy
from cuda_agent.workspace.tool_client import SOCKET_ENV


@dataclass
class EpisodeConfig:
    backend: str = "cpu"
    limits: AgentLimits = field(default_factory=AgentLimits)
    eval_options: EvalOptions | None = None
    use_bwrap: bool | None = None  # None: bubblewrap when usable
    evaluator: Evaluator = evaluate  # a pool's submit in a bench


@dataclass
class Episode:
    out_dir: Path
    exit_reason: str
    turns: int
    context_tokens: int
    completion_tokens: int
    final: EvalResult
    best: EvalResult | None
    tool_evaluations: int
    sandbox: str

    @property
    def reward(self) -> float:
        return max(self.final.reward, self.best.reward if self.best else -1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_reason": self.exit_reason,
            "turns": self.turns,
            "context_tokens": self.context_tokens,
            "completion_tokens": self.completion_tokens,
            "reward": self.reward,
            "final": self.final.to_dict(),
            "best": self.best.to_dict() if self.best else None,
            "tool_evaluations": self.tool_evaluations,
            "sandbox": self.sandbox,
        }


class BestTracker:
    """Keeps the best verified state of the workdir (copied to ``best/``)."""

    def __init__(self, workdir: Path, best_dir: Path, trajectory: Trajectory) -> None:
        self.workdir, self.best_dir, self.trajectory = workdir, best_dir, trajectory
        self.best: EvalResult | None = None
        self.count = 0

    def observe(self, command: str, reply: ToolReply) -> None:
        result = reply.result
        self.trajectory.event(
            "evaluation",
            source=f"tool {command}",
            exit_code=reply.exit_code,
            result=result.to_dict() if result else None,
        )
        if result is None:
            return
        self.count += 1
        if result.correct and (self.best is None or _rank(result) > _rank(self.best)):
            self.best = result
            _copy_solution(self.workdir, self.best_dir)


def run_episode(
    problem: Problem,
    problem_spec: str,
    model: ChatModel,
    out_dir: Path,
    config: EpisodeConfig,
    resume: bool = False,
) -> Episode:
    out_dir.mkdir(parents=True, exist_ok=True)
    workdir = (out_dir / "workdir").resolve()
    options = config.eval_options or EvalOptions(backend=config.backend)
    options.backend = config.backend
    trajectory_path = out_dir / "trajectory.jsonl"
    if resume:
        messages = load_messages(read_events(trajectory_path))
        if not messages:
            raise FileNotFoundError(f"{trajectory_path}: nothing to resume")
    else:
        init_workspace(problem, workdir, config.backend, problem_spec)
    trajectory = Trajectory(trajectory_path)
    if not resume:
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": task_prompt(problem.id, config.backend, str(workdir))},
        ]
        trajectory.event(
            "start",
            problem=problem.id,
            problem_hash=problem.content_hash,
            model=model.name,
            backend=config.backend,
            limits=config.limits.__dict__,
        )
        for message in messages:
            trajectory.event("message", message=message)
    else:
        trajectory.event("resume", messages=len(messages))
    tracker = BestTracker(workdir, out_dir / "best", trajectory)
    ipc = Path(tempfile.mkdtemp(prefix="ca-ipc-", dir=ipc_base()))
    socket_path = ipc / "tool.sock"
    sandbox = Sandbox(
        SandboxPolicy(
            workdir=workdir,
            tmpdir=out_dir / ".tmp",
            hidden=(cache_root(),),
            bind_rw=(ipc,),
            extra_env={SOCKET_ENV: str(socket_path)},
        ),
        use_bwrap=config.use_bwrap,
        allow_unsandboxed=options.allow_unsandboxed,
    )
    shell = PersistentShell(sandbox)
    context = ToolContext(
        workdir=workdir, shell=shell, default_timeout_s=config.limits.tool_timeout_s
    )
    turns_done = sum(1 for m in messages if m.get("role") == "assistant")
    try:
        with ToolServer(socket_path, workdir, options, tracker.observe, config.evaluator):
            loop = run_loop(
                model, default_tools(), context, messages, config.limits, trajectory, turns_done
            )
    finally:
        shell.close()
        shutil.rmtree(ipc, ignore_errors=True)
    final = config.evaluator(problem, load_solution(workdir), options)
    trajectory.event("evaluation", source="final", result=final.to_dict())
    best = tracker.best
    if final.correct and (best is None or _rank(final) >= _rank(best)):
        best = final
        _copy_solution(workdir, out_dir / "best")
    episode = Episode(
        out_dir,
        loop.exit_reason,
        loop.turns,
        loop.context_tokens,
        loop.completion_tokens,
        final,
        best,
        tracker.count,
        sandbox.isolation,
    )
    _write_json(
        out_dir / "result.json",
        {
            "problem": problem.id,
            "model": model.name,
            "backend": config.backend,
            **episode.to_dict(),
        },
    )
    trajectory.event("end", reward=episode.reward)
    trajectory.close()
    return episode


def ipc_base() -> str | None:
    """A short path outside /tmp (the sandbox replaces /tmp) for the tool server's socket."""
    return "/var/tmp" if os.access("/var/tmp", os.W_OK) else None


def _rank(result: EvalResult) -> tuple[float, float, float]:
    return (result.reward, result.speedup_compile or 0.0, result.speedup_eager or 0.0)


def _copy_solution(workdir: Path, target: Path) -> None:
    solution = load_solution(workdir)
    staging = Path(tempfile.mkdtemp(prefix="best-", dir=target.parent))
    for rel, text in solution.files.items():
        path = staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    meta = workdir / ".cuda_agent"
    if meta.is_dir():
        shutil.copytree(meta, staging / ".cuda_agent")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)
