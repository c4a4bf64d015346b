"""GRPO on CUDA-Agent episodes with TRL's ``GRPOTrainer`` and ``environment_factory``.

``run_grpo(model_path, problems, steps, backend, out)`` loads a causal LM and its tokenizer by
path, builds a conversational dataset (``build_dataset``: the system prompt, an empty user turn
that ``KernelEnv.reset`` fills with the task prompt, and the problem spec and size as columns
for ``reset``), and trains with ``GRPOTrainer(environment_factory=KernelEnv bound to the
backend)``: each rollout gets its own fresh workspace and the agent's real tools, and is scored
by the harness's own evaluation of its final workdir (``KernelEnv.get_reward``). It returns
what happened: the optimizer steps taken, every reward the environment gave, the training
loss and whether the weights moved.

What it is: the TRL path of the RL issue, small and synchronous, good for a smoke run or a
single-GPU experiment (TRL generates with ``transformers``; vLLM, multi-GPU and the paper's
full recipe are out of scope here, see ``rl.recipe``). What it is not: a tuned recipe. The
tokenizer must be able to parse tool calls from completions: either a chat template TRL
recognises (Qwen, Llama 3.1, ...) or a ``response_template`` of its own, like the tiny local
model of ``rl.models.tiny``.

GRPO learns only from reward differences within a group: when every rollout of a problem gets
the same reward (a model that never writes a correct kernel gets -1 every time), all
advantages are 0, the gradient is 0 and the step leaves the weights as they were.

``trl`` (and ``datasets``, ``accelerate``) are imported inside the functions, so this module
imports without them (``pip install cuda-agent[rl]``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.agent.prompts import SYSTEM_PROMPT
from cuda_agent.rl.trl.env import KernelEnv
from cuda_agent.rl.trl.settings import grpo_settings
from cuda_agent.rl.trl.weights import moved, snapshot


def build_dataset(
    problems: list[str], size: str = "small", system_prompt: str = SYSTEM_PROMPT
) -> Any:
    """A ``datasets.Dataset`` with one row per problem: ``prompt`` (conversational: the system
    prompt and an empty user turn, completed by ``KernelEnv.reset``), ``problem`` and ``size``."""
    from datasets import Dataset  # type: ignore[import-untyped,unused-ignore]

    if not problems:
        raise ValueError("run_grpo: no problems")
    rows = [
        {
            "prompt": [
                {"role": "system", "content": system_prompt},
                {"role": "user", "content": ""},
            ],
            "problem": spec,
            "size": size,
        }
        for spec in problems
    ]
    return Dataset.from_list(rows)


def run_grpo(
    model_path: str,
    problems: list[str],
    steps: int,
    backend: str,
    out: Path,
    *,
    size: str = "small",
    env_class: type[KernelEnv] = KernelEnv,
    env_kwargs: dict[str, Any] | None = None,
    num_generations: int = 2,
    max_completion_length: int = 64,
    max_tool_calling_iterations: int = 4,
    learning_rate: float = 1e-3,
    seed: int = 0,
    use_cpu: bool | None = None,
    reward_funcs: list[Callable[..., list[float | None]]] | None = None,
    config_overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``model_path`` with GRPO for ``steps`` optimizer steps on ``problems``.

    Each step samples one problem and ``num_generations`` rollouts of it (one ``KernelEnv``
    each, ``backend`` for the workspaces and the evaluation). ``reward_funcs`` are added to the
    environment's reward (TRL sums them, weight 1 each). ``use_cpu`` defaults to "no CUDA
    device". Returns ``{"steps", "rewards", "loss", "changed_params", "metrics",
    "per_step"}``: ``rewards`` lists every ``get_reward`` value in order, ``loss`` is the mean
    training loss, ``changed_params`` says whether any trainable weight differs after
    training, ``metrics`` is the trainer's log history, ``per_step`` the lines of
    ``out/steps.jsonl`` (``rl.trl.step_log``: rewards, pass rate, tokens, seconds).
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig  # type: ignore[import-untyped,unused-ignore]

    from cuda_agent.rl.trl.flat_groups import grpo_trainer_class
    from cuda_agent.rl.trl.step_log import STEPS_FILE, StepLog

    if steps < 1:
        raise ValueError("run_grpo: steps must be >= 1")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    rewards: list[float] = []
    cleanup = contextlib.ExitStack()
    step_log = StepLog(out / STEPS_FILE)

    def factory() -> KernelEnv:
        def on_reward(_problem: str, reward: float) -> None:
            rewards.append(reward)
            step_log.record(reward, env.best_result is not None, env.evaluation_seconds)

        env = env_class(
            backend=backend,
            size=size,
            root=out / "episodes",
            on_reward=on_reward,
            **(env_kwargs or {}),
        )
        return cleanup.enter_context(env)  # every episode folder goes when training ends

    settings = grpo_settings(
        out, steps, num_generations, max_completion_length, learning_rate, seed, use_cpu, GRPOConfig
    )
    settings["max_tool_calling_iterations"] = max_tool_calling_iterations
    settings.update(config_overrides or {})
    extra_rewards: list[Any] = list(reward_funcs or [])
    # Episodes are cleaned up also when training fails; autograd is on whatever the caller's
    # global setting (the trainer relies on the default, and some code turns it off globally).
    with cleanup, torch.enable_grad():
        trainer = grpo_trainer_class()(  # TRL's, skipping micro-batches with no signal
            model=model,
            args=GRPOConfig(**settings),
            train_dataset=build_dataset(problems, size),
            processing_class=tokenizer,
            reward_funcs=extra_rewards,
            environment_factory=factory,
            callbacks=[step_log],
        )
        before = snapshot(model)
        output = trainer.train()
    changed = moved(before, model)
    loss = float(output.training_loss)
    return {
        "steps": int(trainer.state.global_step),
        "rewards": rewards,
        "loss": loss,
        "changed_params": changed,
        "metrics": list(trainer.state.log_history),
        "per_step": step_log.steps,
    }
