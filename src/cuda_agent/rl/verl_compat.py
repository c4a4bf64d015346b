"""Every verl name CUDA Agent uses, in one place, for one pinned verl version.

verl configures itself with Hydra: a run is ``python3 -m verl.trainer.main_ppo`` followed by
``dotted.key=value`` overrides of its ``ppo_trainer.yaml``. ``ppo_overrides`` turns one of our
stage configurations into those overrides; nothing else in the package spells a verl key. When
verl renames a key, this file (and ``VERL_VERSION``) is what changes. The keys were read from
verl 0.9.1's ``verl/trainer/config/_generated_ppo_trainer.yaml``.

Not here: running verl (``recipe.py`` builds the command; the user's cluster runs it).
"""

from __future__ import annotations

from typing import Any

VERL_VERSION = "0.9.1"
PPO_MODULE = "verl.trainer.main_ppo"
SFT_MODULE = "verl.trainer.sft_trainer"
AGENT_LOOP_NAME = "cuda_agent"  # our AgentLoopBase subclass's registered name
AGENT_LOOP_CLASS = "cuda_agent.rl.verl_agent_loop.CudaAgentLoop"


def ppo_overrides(config: dict[str, Any], agent_loop_config: str | None) -> dict[str, Any]:
    """verl ``main_ppo`` overrides for a single-turn, value-pretrain or agentic-ppo stage."""
    algo, batch, optim, rollout = (
        config["algorithm"],
        config["batch"],
        config["optim"],
        config["rollout"],
    )
    model, resources, trainer = config["model"], config["resources"], config["trainer"]
    multi_turn = int(rollout["max_turns"]) > 1
    out: dict[str, Any] = {
        "algorithm.adv_estimator": algo["adv_estimator"],
        "algorithm.gamma": algo["gamma"],
        "algorithm.lam": algo["lam"],
        "data.train_files": config["data"]["train"],
        "data.train_batch_size": batch["train"],
        "data.max_prompt_length": rollout["max_prompt_tokens"],
        "data.max_response_length": rollout["max_response_tokens"],
        "data.return_raw_chat": True,
        "actor_rollout_ref.model.path": model["path"],
        "actor_rollout_ref.actor.optim.lr": optim["actor_lr"],
        "actor_rollout_ref.actor.ppo_mini_batch_size": batch["mini"],
        "actor_rollout_ref.actor.clip_ratio_low": algo["clip_low"],
        "actor_rollout_ref.actor.clip_ratio_high": algo["clip_high"],
        "actor_rollout_ref.actor.loss_agg_mode": algo["loss_agg"],
        "actor_rollout_ref.rollout.name": rollout["engine"],
        "actor_rollout_ref.rollout.mode": "async",
        "actor_rollout_ref.rollout.n": rollout["samples_per_prompt"],
        "actor_rollout_ref.rollout.temperature": rollout["temperature"],
        "actor_rollout_ref.rollout.multi_turn.enable": multi_turn,
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": rollout["max_turns"],
        "critic.model.path": model.get("critic_path") or model["path"],
        "critic.optim.lr": optim["critic_lr"],
        "trainer.project_name": trainer["project"],
        "trainer.experiment_name": trainer.get("experiment") or config["stage"],
        "trainer.default_local_dir": trainer["save_dir"],
        "trainer.nnodes": resources["nnodes"],
        "trainer.n_gpus_per_node": resources["gpus_per_node"],
        "trainer.total_training_steps": config["steps"],
    }
    if agent_loop_config is not None:
        out["actor_rollout_ref.rollout.agent.agent_loop_config_path"] = agent_loop_config
        out["actor_rollout_ref.rollout.agent.default_agent_loop"] = AGENT_LOOP_NAME
    if config.get("critic_only"):
        out["trainer.critic_warmup"] = config["steps"]  # the actor is not updated meanwhile
    return out


def sft_overrides(config: dict[str, Any], data_file: str) -> dict[str, Any]:
    """verl SFT trainer overrides for the rejection fine-tuning stage."""
    return {
        "data.train_files": data_file,
        "data.messages_key": "messages",
        "data.max_length": config["max_tokens"],
        "data.train_batch_size": config["batch"]["train"],
        "model.path": config["model"]["path"],
        "optim.lr": config["optim"]["lr"],
        "trainer.total_epochs": config["epochs"],
        "trainer.project_name": config["trainer"]["project"],
        "trainer.experiment_name": config["trainer"].get("experiment") or config["stage"],
        "trainer.default_local_dir": config["trainer"]["save_dir"],
        "trainer.nnodes": config["resources"]["nnodes"],
        "trainer.n_gpus_per_node": config["resources"]["gpus_per_node"],
    }


def agent_loop_registry(evaluation: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent-loop config file's content (verl reads ``name`` and ``_target_``)."""
    return [{"name": AGENT_LOOP_NAME, "_target_": AGENT_LOOP_CLASS, "evaluation": evaluation}]
