"""The recipe's stages: the paper's settings by default, overrides, and every --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.rl.recipe import STAGES, RecipeError, load_config, plan
from tests.cli.test_cli import cli


def options(stage: str, *overrides: str) -> dict[str, object]:
    return plan(stage, load_config(stage, None, overrides)).engine_options


def test_agentic_ppo_has_the_papers_settings() -> None:
    o = options("agentic-ppo")
    assert o["algorithm.adv_estimator"] == "gae"
    assert (o["algorithm.gamma"], o["algorithm.lam"]) == (1.0, 0.95)
    assert o["actor_rollout_ref.actor.clip_ratio_low"] == 0.2
    assert o["actor_rollout_ref.actor.clip_ratio_high"] == 0.28
    assert o["actor_rollout_ref.actor.loss_agg_mode"] == "token-mean"
    assert o["data.train_batch_size"] == 1024 == o["actor_rollout_ref.actor.ppo_mini_batch_size"]
    assert o["actor_rollout_ref.actor.optim.lr"] == 3e-6 and o["critic.optim.lr"] == 6e-6
    context = int(o["data.max_prompt_length"]) + int(o["data.max_response_length"])  # type: ignore[call-overload]
    assert context == 131072
    assert o["actor_rollout_ref.rollout.multi_turn.max_assistant_turns"] == 150
    assert o["trainer.total_training_steps"] == 150
    assert o["actor_rollout_ref.rollout.agent.default_agent_loop"] == "cuda_agent"


def test_single_turn_and_value_pretrain_differ_where_the_paper_says() -> None:
    single = options("single-turn")
    context = int(single["data.max_prompt_length"]) + int(single["data.max_response_length"])  # type: ignore[call-overload]
    assert context == 32768 and single["actor_rollout_ref.rollout.multi_turn.enable"] is False
    assert "actor_rollout_ref.rollout.agent.default_agent_loop" not in single
    value = options("value-pretrain")
    assert value["trainer.critic_warmup"] == value["trainer.total_training_steps"]
    assert (value["algorithm.gamma"], value["algorithm.lam"]) == (1.0, 0.95)


def test_overrides_and_user_files_merge_over_the_defaults(tmp_path: Path) -> None:
    user = tmp_path / "mine.yaml"
    user.write_text("stage: agentic-ppo\nmodel: {path: /models/mine}\nrollout: {max_turns: 40}\n")
    config = load_config("agentic-ppo", user, ("steps=7", "evaluation.pool=ray://head:10001"))
    assert config["model"]["path"] == "/models/mine"
    assert config["rollout"]["max_turns"] == 40 and config["rollout"]["engine"] == "vllm"
    assert config["steps"] == 7 and config["evaluation"]["pool"] == "ray://head:10001"
    collect = plan("collect", load_config("collect", None, ("evaluation.pool=ray://head:10001",)))
    assert collect.command[-2:] == ["--ray", "ray://head:10001"]


def test_bad_input_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(RecipeError, match="unknown stage"):
        load_config("ppo")
    with pytest.raises(RecipeError, match=r"key\.sub=value"):
        load_config("rft", None, ("steps",))
    other = tmp_path / "other.yaml"
    other.write_text("stage: rft\n")
    with pytest.raises(RecipeError, match="for stage 'rft'"):
        load_config("agentic-ppo", other)
    with pytest.raises(RecipeError, match="no such configuration file"):
        load_config("rft", tmp_path / "missing.yaml")


@pytest.mark.parametrize("stage", STAGES)
def test_every_stage_has_a_dry_run(stage: str, tmp_path: Path) -> None:
    result = cli("train", stage, "--dry-run", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["stage"] == stage and shown["command"]
    assert shown["config"]["stage"] == stage
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
