"""GRPO with TRL on the curriculum's single-turn tasks: one reply per rollout, the evaluator's
reward.

``run_curriculum(model_path, task, steps, backend, out, ...)`` loads a causal LM and its
tokenizer by path, builds a conversational dataset from one split of a curriculum problem set
(``rl.curriculum.problem_set``; by default the train split of the set built into the cache
at ``size``), one row per problem with the task's prompt (``rl.curriculum.tasks.messages``),
and trains with TRL's ``GRPOTrainer`` and one reward function: every completion is scored by
``tasks.score_reply`` (the answer read from the reply, written into a solution, evaluated by
the harness under the task's policy). Each step samples one problem and ``num_generations``
completions of it; GRPO learns from the reward differences within that group.

The run folder gets ``steps.jsonl`` (``rl.trl.step_log``: per step the rewards, pass rate, tokens
and the seconds in generation, evaluation and update) and ``completions.jsonl`` (per
completion: the step, the problem, the reply, the answer read from it, the reward and the
evaluation's error stage). It returns ``{"steps", "rewards", "loss", "changed_params",
"metrics", "per_step"}`` like ``grpo.run_grpo``.

With ``jobs > 1`` a step's completions are evaluated ``jobs`` at a time through a pool
(``rl.curriculum.scoring``; timing still alone on the device); the step's evaluation seconds
are then the wall time of its scoring, shared out over its completions.

Each distinct answer is evaluated once per run (``rl.curriculum.verdicts``; the verdicts are
kept in ``verdicts.jsonl``), so a group that repeats an answer pays for one evaluation.
``stable`` (``rl.trl.settings.StableGRPO``) sets the run against collapse: many groups per
step, the sequence-mean loss, a KL anchor, a constant learning rate; ``guard``
(``rl.trl.guards.GuardLimits``) stops it when replies stop answering or shrink;
``reward_scheme="graded"`` ranks failures for training (``rl.curriculum.rewards``; the
completions keep the harness's reward beside it); ``pairs`` limits the dataset to some
(task, problem) pairs, such as the learnable ones of a sample (``rl.curriculum.sampling``).

What it does not do: tools or multi-turn episodes (``grpo`` does those), or evaluate the
held-out split during training (score it before and after with
``rl.curriculum.evaluate.evaluate_split``).

``trl``, ``transformers`` and ``datasets`` are imported inside the functions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.curriculum import task_names
from cuda_agent.rl.curriculum.problem_set import CurriculumError, curriculum_folder
from cuda_agent.rl.curriculum.rewards import check_scheme, training_reward
from cuda_agent.rl.curriculum.sampling import split_prompts
from cuda_agent.rl.curriculum.scoring import pooled_evaluator
from cuda_agent.rl.curriculum.tasks import check_task
from cuda_agent.rl.curriculum.verdicts import VerdictCache, score_replies
from cuda_agent.rl.trl.guards import GuardLimits
from cuda_agent.rl.trl.settings import StableGRPO
from cuda_agent.rl.trl.weights import moved, snapshot

COMPLETIONS_FILE = "completions.jsonl"
VERDICTS_FILE = "verdicts.jsonl"


def task_list(task: str) -> list[str]:
    """The tasks of ``task``: one name, or several joined by ``+`` (``fill-in+kernel``)."""
    return [check_task(name) for name in task_names(task)]


def curriculum_rows(
    task: str,
    folder: Path,
    split: str,
    backend: str,
    limit: int | None = None,
    pairs: list[tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """One dataset row per problem of the split and task that the task supports (only the
    (task, problem spec) ``pairs`` when given; ``sampling.split_prompts``): ``prompt`` (the
    task's chat prompt), ``problem`` (the problem spec) and ``task``."""
    wanted = set(pairs) if pairs is not None else None
    return [
        {"prompt": p.prompt, "problem": p.spec, "task": p.task}
        for p in split_prompts(task, folder, split, backend, limit, wanted)
    ]


def fill_groups(rows: list[dict[str, Any]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """``rows`` repeated until one generation batch of ``settings`` can be filled: TRL's
    sampler draws ``generation batch / num_generations`` distinct rows per generation and
    drops an incomplete draw, so fewer rows than that would take no step at all."""
    accumulation = int(settings.get("steps_per_generation") or 0) or int(
        settings.get("gradient_accumulation_steps") or 1
    )
    batch = int(settings["per_device_train_batch_size"]) * accumulation
    wanted = max(1, batch // int(settings["num_generations"]))
    if len(rows) >= wanted:
        return rows
    return (rows * (wanted // len(rows) + 1))[: max(wanted, len(rows))]


def completion_text(completion: Any) -> str:
    """The text of a TRL completion (conversational: a list of messages)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        return str(completion[-1].get("content") or "")
    return ""


def run_curriculum(
    model_path: str,
    task: str,
    steps: int,
    backend: str,
    out: Path,
    *,
    folder: str | Path | None = None,
    split: str = "train",
    size: str = "small",
    limit: int | None = None,
    baselines: tuple[str, ...] | list[str] = ("eager",),
    eval_options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    num_generations: int = 4,
    max_completion_length: int = 64,
    learning_rate: float = 1e-6,
    temperature: float = 1.0,
    seed: int = 0,
    use_cpu: bool | None = None,
    save_model: bool = False,
    jobs: int = 1,
    stop_at: float | None = None,
    config_overrides: dict[str, Any] | None = None,
    pairs: list[tuple[str, str]] | None = None,
    stable: StableGRPO | dict[str, Any] | None = None,
    guard: GuardLimits | dict[str, Any] | None = None,
    reward_scheme: str = "harness",
    learnable: str | Path | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Train ``model_path`` with GRPO for ``steps`` optimizer steps on the curriculum task;
    with ``save_model`` the trained policy and its tokenizer are saved to ``out/model``;
    ``stop_at`` (epoch seconds): stop after the step that ends past it (fewer steps);
    ``stable``, ``guard``, ``reward_scheme``, ``pairs``: see the module docstring (a dict:
    the keys of ``StableGRPO`` / ``GuardLimits``); ``learnable``: a ``learnable.json`` whose
    pairs are the ``pairs``; ``spec``: the problem set by its families and sizes
    (``problem_set.curriculum_folder``) when ``folder`` is not given."""
    import torch
    from datasets import Dataset  # type: ignore[import-untyped,unused-ignore]
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig  # type: ignore[import-untyped,unused-ignore]

    from cuda_agent.rl.trl.flat_groups import grpo_trainer_class
    from cuda_agent.rl.trl.guards import CollapseGuard, guard_callback
    from cuda_agent.rl.trl.settings import grpo_settings
    from cuda_agent.rl.trl.step_log import STEPS_FILE, StepLog

    task_list(task)
    check_scheme(reward_scheme)
    if steps < 1:
        raise ValueError("run_curriculum: steps must be >= 1")
    out.mkdir(parents=True, exist_ok=True)
    source = curriculum_folder(folder, spec or {"size": size})
    if learnable is not None:
        from cuda_agent.rl.trl.curriculum_rft import read_learnable

        pairs = read_learnable(Path(learnable))["pairs"]
    if isinstance(stable, dict):
        stable = StableGRPO(**stable)
    if isinstance(guard, dict):
        guard = GuardLimits(**guard)
    rows = curriculum_rows(task, source, split, backend, limit, pairs)
    if not rows:
        chosen = f" among the {len(pairs)} pairs given" if pairs is not None else ""
        raise CurriculumError(
            f"GRPO: no problem of {source}'s {split} split for {task} to train on{chosen} "
            "(a learnable.json names problems of the set it was sampled from)"
        )
    options = eval_options or EvalOptions(backend=backend, baselines=tuple(baselines))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    step_log = StepLog(out / STEPS_FILE)
    rewards: list[float] = []
    settings = grpo_settings(
        out, steps, num_generations, max_completion_length, learning_rate, seed, use_cpu, GRPOConfig
    )
    settings["temperature"] = temperature
    if stable is not None:
        settings.update(stable.config())
    settings.update(config_overrides or {})
    rows = fill_groups(rows, settings)
    collapse = CollapseGuard(step_log, guard) if guard is not None else None
    callbacks = [step_log, *([guard_callback(collapse)] if collapse else [])]
    callbacks += [stop_at_callback(stop_at)] if stop_at else []
    verdicts = VerdictCache(out / VERDICTS_FILE)
    with pooled_evaluator(backend, jobs, evaluator) as scorer, torch.enable_grad():
        # enable_grad: whatever the caller's global setting
        reward = _reward_function(
            task, backend, options, scorer, step_log, rewards, out, jobs, verdicts, reward_scheme
        )
        trainer = grpo_trainer_class()(  # TRL's, skipping micro-batches with no signal
            model=model,
            args=GRPOConfig(**settings),
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            reward_funcs=[reward],
            callbacks=callbacks,
        )
        before = snapshot(model)
        output = trainer.train()
    if trainer.state.global_step == 0:
        raise CurriculumError(f"GRPO took no step on {len(rows)} dataset rows ({settings})")
    if save_model:
        trainer.save_model(str(out / "model"))
        tokenizer.save_pretrained(out / "model")
    changed = moved(before, model)
    return {
        "steps": int(trainer.state.global_step),
        "rewards": rewards,
        "loss": float(output.training_loss),
        "changed_params": changed,
        "metrics": list(trainer.state.log_history),
        "per_step": step_log.steps,
        "stopped_by_guard": collapse.reason if collapse else None,
    }


def _stop_at_class() -> type:
    from transformers import TrainerCallback

    class StopAt(TrainerCallback):  # type: ignore[misc,unused-ignore]
        """Ends training after the step that finishes past ``when`` (epoch seconds)."""

        def __init__(self, when: float) -> None:
            self.when = when

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if time.time() >= self.when:
                control.should_training_stop = True
            return control

    return StopAt


def stop_at_callback(when: float) -> Any:
    """A ``TrainerCallback`` that stops training after the step that ends past ``when``."""
    return _stop_at_class()(when)


def _reward_function(
    task: str,
    backend: str,
    options: EvalOptions,
    evaluator: Evaluator,
    step_log: Any,
    rewards: list[float],
    out: Path,
    jobs: int = 1,
    verdicts: VerdictCache | None = None,
    scheme: str = "harness",
) -> Callable[..., list[float | None]]:
    def reward(
        prompts: list[Any],
        completions: list[Any],
        completion_ids: list[list[int]] | None = None,
        problem: list[str] | None = None,
        trainer_state: Any = None,
        **columns: Any,
    ) -> list[float | None]:
        step_log.scoring_started()
        specs = list(problem or [])
        tasks = list(columns.get("task") or [task] * len(specs))
        texts = [completion_text(completion) for completion in completions]
        began = time.monotonic()
        batch = score_replies(tasks, specs, texts, backend, options, evaluator, jobs, verdicts)
        share = (time.monotonic() - began) / max(1, len(batch))  # wall time, shared out
        scores: list[float | None] = []
        lines = []
        for index, verdict in enumerate(batch):
            tokens = len(completion_ids[index]) if completion_ids is not None else None
            value = training_reward(verdict, scheme)
            flags = list(verdict.flags)
            step_log.record(value, verdict.passed, share, tokens, flags, verdict.outcome)
            scores.append(value)
            rewards.append(value)
            line = {
                "step": int(getattr(trainer_state, "global_step", 0)) + 1,
                "task": tasks[index],
                "problem": specs[index],
                "reply": texts[index],
                "answer": verdict.answer,
                "reward": verdict.reward,  # the harness's
                "training_reward": value,
                "error_stage": verdict.error_stage,
                "outcome": verdict.outcome,
                "flags": flags,
                "cached": verdict.cached,
            }
            lines.append(json.dumps(line) + "\n")
        with open(out / COMPLETIONS_FILE, "a", encoding="utf-8") as handle:
            handle.writelines(lines)
        return scores

    reward.__name__ = task.replace("-", "_").replace("+", "_")
    return reward
