"""Two TRL GRPO steps with the tiny local model, scored by the cuda-backend evaluator.

The CPU suite's steered step (``tests/rl/trl/test_grpo.py``) on the GPU: in each group of two
rollouts, the first finds the cuda ``relu`` example in its workspace and copies it into place
with the one tool call the model is steered to make; the harness builds and evaluates it on
the GPU (correct: reward >= 1); the other rollout's copy fails (-1). Two optimizer steps, and
the weights move.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("transformers", minversion="5.15")
pytest.importorskip("trl", minversion="1.16")

from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
from cuda_agent.examples import examples_root
from cuda_agent.rl.models.tiny import build_tiny_model
from cuda_agent.rl.trl.env import KernelEnv
from cuda_agent.rl.trl.grpo import run_grpo
from tests.helpers import fast_options
from tests.rl.trl.test_grpo import FORCED_COMPLETION, CountingEnv, last_step

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


class CudaHintedEnv(CountingEnv):
    resets: ClassVar[int] = 0

    def reset(self, **row: Any) -> str:
        prompt = super().reset(**row)
        type(self).resets += 1
        if type(self).resets % 2 == 1:
            assert self.workdir is not None
            example = (examples_root() / "relu" / "cuda.py").read_text(encoding="utf-8")
            (self.workdir / "reference_solution.py").write_text(example, encoding="utf-8")
        return prompt


def test_two_grpo_steps_scored_on_the_gpu(tmp_path: Path) -> None:
    folder = tmp_path / "tiny"
    _, tokenizer = build_tiny_model(folder)
    env = KernelEnv()
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task_prompt("relu", "cuda", "/w")},
    ]
    prompt = tokenizer.apply_chat_template(
        messages,
        tools=[env.bash, env.edit_file, env.read_file, env.write_file],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    tail = tuple(prompt[-8:])
    forced = tokenizer(FORCED_COMPLETION, add_special_tokens=False)["input_ids"]
    bias = {tail + tuple(forced[: k + 1]): 100.0 for k in range(len(forced))}
    CudaHintedEnv.reward_calls, CudaHintedEnv.finals, CudaHintedEnv.resets = 0, [], 0
    result = run_grpo(
        str(folder),
        ["relu"],
        steps=2,
        backend="cuda",
        out=tmp_path / "run",
        env_class=CudaHintedEnv,
        env_kwargs={"eval_options": fast_options(backend="cuda", worker_timeout_s=300.0)},
        num_generations=2,
        max_completion_length=128,
        max_tool_calling_iterations=1,
        config_overrides={"generation_kwargs": {"sequence_bias": bias}},
    )
    print("GRPO on cuda:", {k: result[k] for k in ("steps", "rewards", "loss", "changed_params")})
    for final in CudaHintedEnv.finals:
        if final is not None:
            print("  evaluation:", final.correct, final.reward, final.runtime_us, final.eager_us)
    assert result["steps"] == 2 and CudaHintedEnv.reward_calls == 4
    solved = [f for f in CudaHintedEnv.finals if f is not None and f.correct]
    assert len(solved) == 2 and all(f.backend == "cuda" and f.reward >= 1.0 for f in solved)
    assert sorted(result["rewards"])[:2] == [-1.0, -1.0]
    assert math.isfinite(result["loss"]) and last_step(result)["grad_norm"] > 0.0
    assert result["changed_params"] is True
