"""``run_episode``: the ReAct loop over a chat model, driven over one episode environment.

The environment (``environment.KernelEnvironment``) owns the workdir, the sandboxed shell, the
tools, the workspace tool server and the harness's verdicts; this driver adds the model: the
system and task prompts, the loop (``agent.loop.run_loop``) with its turn and token limits,
every message in ``trajectory.jsonl`` as it happens, and ``result.json`` at the end. The reward
is the environment's: the best of the final evaluation and the verified evaluations made
during the episode, never parsed from tool output. ``resume`` continues a trajectory whose
workdir is already there. bench and ``solve`` consume this and nothing below it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.loop import AgentLimits, run_loop
from cuda_agent.agent.models import ChatModel
from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
from cuda_agent.agent.trajectory import load_messages, read_events
from cuda_agent.core.types import EvalResult, Problem
from cuda_agent.environment import KernelEnvironment
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator


@dataclass
class EpisodeConfig:
    backend: str = "cpu"
    limits: AgentLimits = field(default_factory=AgentLimits)
    eval_options: EvalOptions | None = None
    use_bwrap: bool | None = None  # None: bubblewrap when usable
    evaluator: Evaluator = evaluate  # a pool's submit in a bench
    language: str = "cuda"  # the workspace's kernel language: cuda or triton


@dataclass
class EpisodeResult:
    """What ``run_episode`` returns (and writes to ``result.json``)."""

    out_dir: Path
    exit_reason: str
    turns: int
    context_tokens: int
    completion_tokens: int
    final: EvalResult
    best: EvalResult | None
    tool_evaluations: int
    sandbox: str
    reward: float

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


def run_episode(
    problem: Problem,
    problem_spec: str,
    model: ChatModel,
    out_dir: Path,
    config: EpisodeConfig,
    resume: bool = False,
) -> EpisodeResult:
    """One episode of ``model`` on ``problem`` in ``out_dir`` (see the module docstring)."""
    trajectory_path = out_dir / "trajectory.jsonl"
    messages: list[dict[str, Any]] = []
    if resume:
        messages = load_messages(read_events(trajectory_path))
        if not messages:
            raise FileNotFoundError(f"{trajectory_path}: nothing to resume")
    env = KernelEnvironment.open(
        problem,
        problem_spec,
        out_dir,
        backend=config.backend,
        eval_options=config.eval_options,
        evaluator=config.evaluator,
        use_bwrap=config.use_bwrap,
        tool_timeout_s=config.limits.tool_timeout_s,
        start={"model": model.name, "limits": config.limits.__dict__},
        resume=resume,
        language=config.language,
    )
    with env:
        if resume:
            env.trajectory.event("resume", messages=len(messages))
        else:
            messages = [
                {"role": "system", "content": SYSTEM_PROMPT},
                {
                    "role": "user",
                    "content": task_prompt(
                        problem.id, config.backend, str(env.workdir), config.language
                    ),
                },
            ]
            for message in messages:
                env.trajectory.event("message", message=message)
        turns_done = sum(1 for m in messages if m.get("role") == "assistant")
        try:
            loop = run_loop(
                model, env.tools, env.context, messages, config.limits, env.trajectory, turns_done
            )
        finally:
            env.stop_tools()
        score = env.finish()
        episode = EpisodeResult(
            out_dir,
            loop.exit_reason,
            loop.turns,
            loop.context_tokens,
            loop.completion_tokens,
            score.final,
            score.best,
            env.tracker.count,
            env.isolation,
            score.reward,
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
    return episode


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    os.replace(tmp, path)
