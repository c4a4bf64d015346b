"""The parts of the kernel-learning recipe that need no model: GRPO settings set against
collapse (TRL 1.16's own option names), the collapse guard, the graded training reward, the
verdict cache, the learnable set and the RFT examples, and the recipe's plans.

The slow tests (tests/rl/trl/test_curriculum_training.py) run them with real models and the
real evaluator.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.rl.curriculum.rewards import GRADED, training_reward
from cuda_agent.rl.curriculum.sampling import (
    Sample,
    learnable,
    pass_counts,
    read_samples,
    write_samples,
)
from cuda_agent.rl.curriculum.verdicts import NO_ANSWER, Verdict, VerdictCache, verdict_key
from cuda_agent.rl.recipe import load_config, plan
from cuda_agent.rl.trl.guards import CollapseGuard, GuardLimits
from cuda_agent.rl.trl.settings import StableGRPO


def sample(problem: str, outcome: str, answer: str | None = "a", **extra: object) -> Sample:
    rewards = {"pass": 1.0, "format": -1.0, "build": -1.0, "wrong": -1.0}
    fields: dict[str, object] = {
        "problem": problem,
        "task": "kernel",
        "family": "elementwise",
        "ops": ("relu",),
        "reply": f"```cuda\n{answer}\n```",
        "tokens": 40,
        "truncated": False,
        "answer": None if outcome == "format" else answer,
        "reward": rewards[outcome],
        "outcome": outcome,
        "error_stage": None,
        "flags": (),
        "cached": False,
    }
    fields.update(extra)
    return Sample(**fields)  # type: ignore[arg-type]


def test_stable_grpo_sets_trl_116s_own_options_against_collapse() -> None:
    from trl import GRPOConfig

    config = StableGRPO().config()
    fields = GRPOConfig.__dataclass_fields__
    assert set(config) <= set(fields), set(config) - set(fields)
    # 64 replies a step, in micro-batches, one generation and one update per step
    rollouts = config["per_device_train_batch_size"] * config["gradient_accumulation_steps"]
    assert (
        rollouts == 64 and config["steps_per_generation"] == config["gradient_accumulation_steps"]
    )
    assert config["loss_type"] == "grpo" and config["beta"] > 0
    assert config["lr_scheduler_type"] == "constant" and config["mask_truncated_completions"]
    assert config["loss_type"] in GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    built = GRPOConfig(output_dir="/tmp/unused", use_cpu=True, report_to="none", **config)
    assert built.beta == 0.04 and built.epsilon_high == 0.28
    with pytest.raises(ValueError, match="multiple"):
        StableGRPO(rollouts=60).check()
    with pytest.raises(ValueError, match="whole groups"):
        StableGRPO(micro_batch=4, rollouts=64).check()


def steps_of(*figures: tuple[int, int, int]) -> list[dict[str, object]]:
    """Logged steps from (replies, no-answer replies, tokens in all)."""
    return [
        {"step": i + 1, "rewards": [0.0] * n, "outcomes": {"format": f}, "completion_tokens": t}
        for i, (n, f, t) in enumerate(figures)
    ]


class Log:
    def __init__(self) -> None:
        self.steps: list[dict[str, object]] = []


def test_the_guard_stops_when_replies_stop_answering_or_shrink() -> None:
    log = Log()
    guard = CollapseGuard(log, GuardLimits())
    log.steps = steps_of((64, 3, 6400), (64, 4, 6300), (64, 5, 6200))
    assert not guard.after_log() and guard.reason is None  # steady: train on
    log.steps += steps_of((64, 14, 6000), (64, 16, 5900))  # 3/64 -> 15/64: more than doubled
    assert guard.after_log() and "no answer" in (guard.reason or "")
    shrinking = Log()
    guard = CollapseGuard(shrinking, GuardLimits())
    shrinking.steps = steps_of((64, 0, 6400), (64, 0, 3000), (64, 0, 3200))
    assert guard.after_log() and "length" in (guard.reason or "")
    # a given reference (the starting checkpoint's sample) rather than the first step
    given = Log()
    guard = CollapseGuard(given, GuardLimits(format_share=0.25, mean_tokens=100))
    given.steps = steps_of((64, 20, 6400), (64, 20, 6400))
    assert not guard.after_log()  # 0.31 is below twice 0.25
    one = Log()
    guard = CollapseGuard(one, GuardLimits(window=2))
    one.steps = steps_of((64, 60, 100))
    assert not guard.after_log()  # one step is not a window


def test_graded_failures_rank_no_answer_below_build_below_wrong_below_pass() -> None:
    build = Verdict(-1.0, "build", "build")
    wrong = Verdict(-1.0, "wrong", "verify")
    flagged = Verdict(-1.0, "wrong", "verify", flags=("stream_mismatch",))
    passed = Verdict(2.0, "pass")
    graded = [training_reward(v, "graded") for v in (NO_ANSWER, build, wrong, passed)]
    assert graded == sorted(graded) and len(set(graded)) == 4
    assert graded[-1] == 2.0  # a pass keeps the harness's reward (and its speed-up)
    assert training_reward(flagged, "graded") == -1.0 == training_reward(NO_ANSWER, "graded")
    assert [training_reward(v) for v in (NO_ANSWER, build, wrong)] == [-1.0] * 3
    assert set(GRADED.values()) < set(graded)
    with pytest.raises(ValueError, match="choose from"):
        training_reward(build, "shaped")


def test_the_verdict_cache_survives_the_process_and_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "verdicts.jsonl"
    options = EvalOptions(backend="cpu")
    key = verdict_key("kernel", "p#1", "code", "cpu", options)
    assert key != verdict_key("kernel", "p#1", "code ", "cpu", options)
    assert key != verdict_key("kernel", "p#1", "code", "cpu", EvalOptions(backend="cpu", seed=3))
    cache = VerdictCache(path)
    cache.put(key, Verdict(1.0, "pass", flags=("x",), answer="code"))
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "torn", "verd')
    again = VerdictCache(path)
    assert len(again) == 1
    assert again.get(key) == Verdict(1.0, "pass", flags=("x",), answer="code")


def test_learnable_problems_are_those_strictly_between_zero_and_one(tmp_path: Path) -> None:
    samples = [sample("a", "pass"), sample("a", "build")]  # 1 of 2: learnable
    samples += [sample("b", "pass"), sample("b", "pass")]  # always: nothing to learn
    samples += [sample("c", "wrong"), sample("c", "format")]  # never: no signal
    assert pass_counts(samples)[("kernel", "a")] == (1, 2)
    assert learnable(samples) == [("kernel", "a")]
    write_samples(tmp_path / "s.jsonl", samples)
    assert read_samples(tmp_path / "s.jsonl") == samples


def test_rft_examples_keep_distinct_clean_passes_a_few_per_problem() -> None:
    from cuda_agent.rl.curriculum.problem_set import (
        CurriculumSpec,
        problem_set_folder,
        read_split,
        row_spec,
    )
    from cuda_agent.rl.trl.sft import rft_examples

    folder = problem_set_folder(CurriculumSpec(n_train=4, n_heldout=2))
    spec = row_spec(folder, read_split(folder, "train")[0])
    samples = [
        sample(spec, "pass", "k1"),
        sample(spec, "pass", "k1 "),  # the same answer, whitespace aside
        sample(spec, "pass", "k2", flags=("stream_mismatch",)),  # flagged
        sample(spec, "pass", "k3", truncated=True),  # cut off
        sample(spec, "wrong", "k4"),
        sample(spec, "pass", "k5"),
        sample(spec, "pass", "k6"),
    ]
    examples = rft_examples(samples, "cpu", per_problem=2)
    replies = [e["completion"][0]["content"] for e in examples]
    assert replies == ["```cuda\nk1\n```", "```cuda\nk5\n```"]
    assert examples[0]["prompt"][0]["role"] == "system"
    assert "elementwise_launch" in examples[0]["prompt"][0]["content"]  # the kernel rung's
    assert examples[0]["completion"][0]["role"] == "assistant"


def test_train_rft_with_a_task_plans_trl_sft_on_the_curriculum() -> None:
    config = load_config(
        "rft", overrides=("curriculum.task=kernel", "model.path=/m", "curriculum.samples=4")
    )
    resolved = plan("rft", config)
    assert resolved.engine == "trl-sft" and "run_rft_options" in resolved.command_line()
    options = resolved.engine_options
    assert options["sampling"]["samples"] == 4 and options["task"] == "kernel"
    assert options["spec"]["families"] == ["elementwise", "chain", "rowwise", "reduction"]
    assert options["spec"]["n_train"] >= 128 and options["spec"]["n_heldout"] >= 48
    assert resolved.config["evaluation"]["policy"] == "strict"
    json.dumps(resolved.as_dict())  # the dry run's --json
    agentic = plan("rft", load_config("rft"))
    assert agentic.engine == "verl-sft"  # without a task: the agentic recipe, unchanged


def test_train_grpo_plans_the_stable_settings_the_guard_and_the_reward() -> None:
    overrides = (
        "curriculum.task=kernel",
        "curriculum.stable={}",
        "curriculum.guard={}",
        "curriculum.reward=graded",
        "curriculum.learnable=runs/rft/learnable.json",
    )
    options = plan("grpo", load_config("grpo", overrides=overrides)).engine_options
    assert options["stable"] == {} and options["guard"] == {}
    assert options["reward_scheme"] == "graded"
    assert options["learnable"] == "runs/rft/learnable.json"


def test_scoring_progress_speaks_while_no_verdict_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent.rl.curriculum import verdicts

    monkeypatch.setattr(verdicts, "PROGRESS_S", 0.01)
    lines: list[str] = []
    heard = threading.Event()

    def log(line: str) -> None:
        lines.append(line)
        heard.set()

    progress = verdicts._Progress(3, log)
    with progress.ticking():  # every evaluation still running (a device held by another job)
        assert heard.wait(timeout=60), "no progress line while evaluations ran"
    assert lines[0].startswith("evaluated 0/3 distinct answers (0 passed)"), lines
