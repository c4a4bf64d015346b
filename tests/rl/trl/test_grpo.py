"""TRL's GRPOTrainer trains on CUDA-Agent episodes through ``environment_factory`` (cpu backend).

A tiny random model with a locally trained tokenizer (``rl.models.tiny``) takes real GRPO
optimizer steps on the bundled ``relu`` problem at small size. Every rollout gets its own
workspace and the agent's real tools (``rl.trl.env.KernelEnv``) and is scored by the harness's
own evaluator.

* With the random model as is, nothing valid is written: every reward is -1 and comes from a
  real evaluation (a strict-policy failure, not a short cut). All rewards of the group being
  equal, every GRPO advantage is 0, so the gradient is exactly 0 and the weights do not move:
  that is GRPO working as intended, asserted here.
* To see the environment's reward drive an update, the model is steered (a ``sequence_bias``
  in the generation config) to emit one fixed tool call, ``bash`` with
  ``cp reference_solution.py model_new.py``, and the first rollout's workspace holds that file
  (a correct example kernel): TRL parses the call with the tokenizer's response template,
  runs it through ``KernelEnv.bash`` in the sandboxed shell, and the evaluator scores that
  rollout as correct (1.0, or more if its timing beats a baseline) and the other -1.0 (cp
  fails there). The advantages are then non-zero
  and the optimizer step changes the weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("transformers", minversion="5.15")
pytest.importorskip("trl", minversion="1.16")

from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.examples import examples_root
from cuda_agent.rl.models.tiny import build_tiny_model
from cuda_agent.rl.trl.env import KernelEnv
from cuda_agent.rl.trl.grpo import run_grpo
from tests.helpers import fast_options

FORCED_COMPLETION = (
    '<tool_call>\n{"name": "bash", "arguments": {"command": "cp reference_solution.py '
    'model_new.py"}}\n</tool_call><|im_end|>'
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = tmp_path_factory.mktemp("tiny") / "model"
    _, tokenizer = build_tiny_model(folder)
    return folder, tokenizer


class CountingEnv(KernelEnv):
    """Counts ``get_reward`` calls and keeps each episode's final evaluation."""

    reward_calls: ClassVar[int] = 0
    finals: ClassVar[list[EvalResult | None]] = []

    def get_reward(self) -> float:
        type(self).reward_calls += 1
        reward = super().get_reward()
        type(self).finals.append(self.final_result)
        return reward


class HintedEnv(CountingEnv):
    """The first rollout of each group finds a correct solution in ``reference_solution.py``."""

    resets: ClassVar[int] = 0

    def reset(self, **row: Any) -> str:
        prompt = super().reset(**row)
        type(self).resets += 1
        if type(self).resets % 2 == 1:
            assert self.workdir is not None
            example = (examples_root() / "relu" / "cpu.py").read_text(encoding="utf-8")
            (self.workdir / "reference_solution.py").write_text(example, encoding="utf-8")
        return prompt


def last_step(result: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in reversed(result["metrics"]) if "loss" in m)


def test_tiny_model_is_local_deterministic_and_parses_tool_calls(
    tiny_model: tuple[Path, Any], tmp_path: Path
) -> None:
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        parse_response,
        supports_tool_calling,
    )

    folder, _ = tiny_model
    build_tiny_model(tmp_path / "again")
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json", "model.safetensors"):
        assert (folder / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.padding_side == "left" and tokenizer.pad_token == "<|endoftext|>"
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    env = KernelEnv()
    tools = [env.bash, env.read_file, env.write_file, env.edit_file]
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_prompt("relu", "cpu", "/w")},
    ]
    prompt = tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    text = tokenizer.decode(prompt)
    assert '"name": "edit_file"' in text and text.endswith("<|im_start|>assistant\n")
    ids = tokenizer(FORCED_COMPLETION, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == FORCED_COMPLETION
    parsed = parse_response(tokenizer, ids, prefix=prompt, tools=tools)
    command = "cp reference_solution.py model_new.py"
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "bash", "arguments": {"command": command}}}
    ]


def test_kernel_env_uses_the_agent_tools_and_the_evaluator(tmp_path: Path) -> None:
    calls: list[tuple[str, Solution, EvalOptions]] = []

    def evaluator(problem: Problem, solution: Solution, options: EvalOptions) -> EvalResult:
        calls.append((problem.id, solution, options))
        return EvalResult(problem_id=problem.id, backend=options.backend, reward=-1.0)

    with KernelEnv(root=tmp_path, evaluator=evaluator) as env:
        prompt = env.reset(problem="relu", size="small", prompt=[])
        workdir = env.workdir
        assert workdir is not None and str(workdir) in prompt and "`relu`" in prompt
        assert env.bash("pwd").strip() == str(workdir)
        assert "read it first" in env.write_file("model_new.py", "x")
        assert "ReLU" in env.read_file("model.py")
        assert env.write_file("kernels/relu.cpp", "// x\n").startswith("wrote kernels/relu.cpp")
        assert "outside the workdir" in env.read_file("/etc/hostname")
        assert env.get_reward() == -1.0 and env.get_reward() == -1.0
        assert [(c[0], c[1].path, c[2].backend) for c in calls] == [("relu", workdir, "cpu")]
        assert env.bash("ls") == "error: the episode is over"
        meta = json.loads((workdir / ".cuda_agent" / "workspace.json").read_text())
        assert meta["problem"] == "relu" and meta["backend"] == "cpu"
    assert not workdir.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.slow  # GRPO steps with evaluations
def test_grpo_step_random_model_every_reward_is_the_evaluators_minus_one(
    tiny_model: tuple[Path, Any], tmp_path: Path
) -> None:
    CountingEnv.reward_calls, CountingEnv.finals = 0, []
    result = run_grpo(
        str(tiny_model[0]),
        ["relu"],
        steps=1,
        backend="cpu",
        out=tmp_path / "run",
        env_class=CountingEnv,
        env_kwargs={"eval_options": fast_options()},
        num_generations=2,
        max_completion_length=32,
    )
    assert result["steps"] == 1
    assert CountingEnv.reward_calls == 2  # once per generation
    assert result["rewards"] == [-1.0, -1.0]
    for final in CountingEnv.finals:  # real evaluations of the untouched workdir
        assert final is not None and not final.correct and final.reward == -1.0
        assert final.error is not None and final.error.stage == "verify"
        assert "policy strict" in final.error.message
    step = last_step(result)
    assert step["rewards/CountingEnv/mean"] == -1.0 and step["rewards/CountingEnv/std"] == 0.0
    assert math.isfinite(result["loss"]) and math.isfinite(step["loss"])
    # Equal rewards in the group: zero advantages, zero gradient, no update (GRPO as intended);
    # the micro-batch's forward and backward are skipped (rl/trl/flat_groups.py)
    assert step["frac_reward_zero_std"] == 1.0 and step["grad_norm"] == 0.0
    assert step["flat_share"] == 1.0 and result["per_step"][0]["flat_share"] == 1.0
    assert result["changed_params"] is False
    assert list((tmp_path / "run" / "episodes").iterdir()) == []  # episodes cleaned up


@pytest.mark.slow  # GRPO steps with evaluations
def test_grpo_step_tool_call_reward_from_the_evaluator_moves_the_weights(
    tiny_model: tuple[Path, Any], tmp_path: Path
) -> None:
    folder, tokenizer = tiny_model
    HintedEnv.reward_calls, HintedEnv.finals, HintedEnv.resets = 0, [], 0
    env = KernelEnv()
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_prompt("relu", "cpu", "/w")},
    ]
    prompt = tokenizer.apply_chat_template(
        messages,
        tools=[env.bash, env.edit_file, env.read_file, env.write_file],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    # The prompt's last tokens ("model.py.<|im_end|>\n<|im_start|>assistant\n") are part of
    # every biased sequence, so only the first turn is steered, not the turn after the tool.
    tail = tuple(prompt[-8:])
    forced = tokenizer(FORCED_COMPLETION, add_special_tokens=False)["input_ids"]
    bias = {tail + tuple(forced[: k + 1]): 100.0 for k in range(len(forced))}
    result = run_grpo(
        str(folder),
        ["relu"],
        steps=1,
        backend="cpu",
        out=tmp_path / "run",
        env_class=HintedEnv,
        env_kwargs={"eval_options": fast_options()},
        num_generations=2,
        max_completion_length=128,
        max_tool_calling_iterations=1,
        config_overrides={"generation_kwargs": {"sequence_bias": bias}},
    )
    step = last_step(result)
    assert step["tools/call_frequency"] == 1.0 and step["tools/failure_frequency"] == 0.0
    assert HintedEnv.reward_calls == 2
    solved, failed = HintedEnv.finals
    assert solved is not None and solved.correct and solved.error is None
    assert failed is not None and not failed.correct
    # correct: 1, or 2 / 3 when timing says it beats eager / torch.compile by 5%
    assert result["rewards"] == [solved.reward, -1.0] and solved.reward >= 1.0
    assert math.isfinite(result["loss"]) and step["grad_norm"] > 0.0
    assert step["flat_share"] == 0.0  # a reward differs: the update ran
    assert result["changed_params"] is True


@pytest.mark.slow  # GRPO steps with evaluations
def test_train_grpo_command_takes_a_real_step(tiny_model: tuple[Path, Any], tmp_path: Path) -> None:
    import json

    from tests.cli.test_cli import cli

    folder, _ = tiny_model
    result = cli(
        "train", "grpo", "--model", str(folder), "--steps", "1", "--backend", "cpu",
        f"out={tmp_path / 'run'}", "grpo.max_completion_length=16",
        "grpo.max_tool_calling_iterations=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])  # printed last
    assert summary["steps"] == 1 and summary["rewards"] == [-1.0, -1.0]
    steps = [
        json.loads(line) for line in (tmp_path / "run" / "steps.jsonl").read_text().splitlines()
    ]
    assert steps == summary["per_step"] and steps[0]["rewards"] == [-1.0, -1.0]
    assert steps[0]["pass_rate"] == 0.0 and steps[0]["grad_norm"] == 0.0
    assert set(steps[0]["seconds"]) == {"step", "generation", "evaluation", "update"}
