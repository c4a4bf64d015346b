"""The paper's training recipe as stages: configuration files in, engine commands out.

Stages (``STAGES``), in the paper's order: ``single-turn`` (PPO warm-up, one reply per
problem), ``collect`` (the agent over the training problems, through ``bench run``), ``rft``
(rejection fine-tuning on clean successful trajectories), ``value-pretrain`` (the critic on
agent trajectories, actor frozen) and ``agentic-ppo`` (PPO with the critic); ``grpo`` is the
light single-node TRL path (``trl/grpo.py``). Each has a configuration file shipped in
``rl/configs/`` holding the paper's settings, merged over ``common.yaml``; a user file and
``dotted.key=value`` overrides come on top. ``grpo`` and ``single-turn`` can run a rung of
the curriculum instead of their problems (``curriculum.task``: ``model-new``,
``fill-in``, ``kernel`` or several joined by ``+``,
``rl/curriculum/``; the task sets the evaluation policy). ``plan`` resolves everything into
a ``Plan``: the full configuration, the engine's own options (verl's Hydra
overrides, see ``verl/compat.py``) and the command line. ``cuda-agent train STAGE --dry-run``
prints the plan and starts nothing.

Not here: the engines themselves. verl runs on the user's Ray cluster with vLLM; the
verl agent loop and reward adapters that the commands name are separate modules.
"""

from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.rl.curriculum import POLICIES, task_names
from cuda_agent.rl.verl import compat

STAGES = ("single-turn", "collect", "rft", "value-pretrain", "agentic-ppo", "grpo")


class RecipeError(CudaAgentError):
    """A stage name, configuration file or override that cannot be used."""


@dataclass
class Plan:
    stage: str
    engine: str
    config: dict[str, Any]
    command: list[str]
    engine_options: dict[str, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path -> content to write first
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)  # verl data to write first
    notes: list[str] = field(default_factory=list)

    def command_line(self) -> str:
        return shlex.join(self.command)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "engine": self.engine,
            "command": self.command_line(),
            "engine_options": self.engine_options,
            "files": self.files,
            "datasets": self.datasets,
            "config": self.config,
            "notes": self.notes,
        }


def configs_root() -> Path:
    return Path(str(resources.files("cuda_agent.rl") / "configs"))


def load_config(
    stage: str, user_file: Path | None = None, overrides: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``common.yaml``, then the stage's file, then ``user_file``, then ``key.sub=value``."""
    if stage not in STAGES:
        raise RecipeError(f"unknown stage {stage!r} (choose from {', '.join(STAGES)})")
    config = _read_yaml(configs_root() / "common.yaml")
    config = _merge(config, _read_yaml(configs_root() / f"{stage}.yaml"))
    if user_file is not None:
        user = _read_yaml(user_file)
        if user.get("stage", stage) != stage:
            raise RecipeError(f"{user_file} is for stage {user['stage']!r}, not {stage!r}")
        config = _merge(config, user)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise RecipeError(f"override {item!r}: expected key.sub=value")
        _set_dotted(config, key.strip(), yaml.safe_load(raw) if raw else "")
    return config


def plan(stage: str, config: dict[str, Any]) -> Plan:
    """The engine command and options for ``stage`` under ``config``."""
    if stage in ("single-turn", "value-pretrain", "agentic-ppo"):
        return _plan_ppo(stage, config)
    if stage == "collect":
        return _plan_collect(config)
    if stage == "grpo":
        return _plan_grpo(config)
    return _plan_rft(config)


def _plan_ppo(stage: str, config: dict[str, Any]) -> Plan:
    agentic = int(config["rollout"]["max_turns"]) > 1
    task = _curriculum_task(config)
    if task and agentic:
        raise RecipeError(f"curriculum task {task!r} is single-turn: set rollout.max_turns=1")
    files: dict[str, str] = {}
    loop_file = None
    if agentic:
        loop_file = str(Path(config["trainer"]["save_dir"]) / stage / "agent_loop.yaml")
        files[loop_file] = yaml.safe_dump(compat.agent_loop_registry(config["evaluation"]))
    train_file = str(Path(config["trainer"]["save_dir"]) / stage / "train.parquet")
    source: dict[str, Any] = {
        "problems": str(config["data"]["train"]),
        "agentic": agentic,
        "backend": str(config["evaluation"]["backend"]),
        "size": str(config["data"].get("size", "standard")),
    }
    if task:
        curriculum = config["curriculum"]
        source["problems"] = f"curriculum {task} ({curriculum.get('split') or 'train'} split)"
        source["curriculum"] = {
            "task": task,
            "split": str(curriculum.get("split") or "train"),
            "folder": curriculum.get("folder"),
            "size": source["size"],
        }
    datasets = {train_file: source}
    options = compat.ppo_overrides(config, loop_file, train_file)
    command = [
        "python3",
        "-m",
        compat.PPO_MODULE,
        *(f"{k}={_hydra(v)}" for k, v in options.items()),
    ]
    notes = [
        f"verl {compat.VERL_VERSION} with vLLM on a Ray cluster; evaluation GPUs apart "
        f"(evaluation.pool = {config['evaluation']['pool']})",
    ]
    if not agentic:
        notes.append("single reply per problem: verl's single-turn loop, our evaluator as reward")
    notes.append(f"the verl dataset {train_file} is written from {source['problems']} first")
    if task:
        notes.append(_curriculum_note(task))
    return Plan(stage, "verl", config, command, options, files, datasets, notes=notes)


def _plan_collect(config: dict[str, Any]) -> Plan:
    agent = config["agent"]
    command = [
        "cuda-agent",
        "bench",
        "run",
        "--problems",
        str(config["data"]["train"]),
        "--model",
        str(agent["model"]),
        "--base-url",
        str(agent["base_url"]),
        "--attempts",
        str(agent["attempts"]),
        "--parallel",
        str(agent["parallel"]),
        "--max-turns",
        str(agent["max_turns"]),
        "--backend",
        str(config["evaluation"]["backend"]),
        "--policy",
        str(config["evaluation"]["policy"]),
        "--out",
        str(config["out"]),
    ]
    pool = config["evaluation"]["pool"]
    if pool != "local":  # bench's "--ray local" is the Ray cluster of this machine
        command += ["--ray", "local" if pool == "ray" else str(pool)]
    notes = ["serve the single-turn model behind an OpenAI-compatible endpoint (vLLM) first"]
    return Plan("collect", "bench", config, command, {}, {}, notes=notes)


def _plan_grpo(config: dict[str, Any]) -> Plan:
    task = _curriculum_task(config)
    if task:
        return _plan_grpo_curriculum(config, task)
    options = {
        "model_path": config["model"]["path"],
        "problems": list(config["problems"]),
        "steps": config["steps"],
        "backend": config["evaluation"]["backend"],
        "out": str(config["out"]),
        "size": config["size"],
        **config["grpo"],
    }
    command = [
        "python3",
        "-c",
        f"from cuda_agent.rl.trl.grpo import run_grpo; run_grpo(**{options!r})",
    ]
    notes = ["TRL on this node: generation with transformers, one evaluator per rollout"]
    return Plan("grpo", "trl", config, command, options, {}, notes=notes)


def _plan_grpo_curriculum(config: dict[str, Any], task: str) -> Plan:
    curriculum = config["curriculum"]
    options = {
        "model_path": config["model"]["path"],
        "task": task,
        "steps": config["steps"],
        "backend": config["evaluation"]["backend"],
        "out": str(config["out"]),
        "folder": curriculum.get("folder"),
        "split": str(curriculum.get("split") or "train"),
        "size": str(config["size"]),
        "baselines": list(config["evaluation"]["baselines"]),
        "num_generations": curriculum["num_generations"],
        "max_completion_length": curriculum["max_completion_length"],
        "temperature": curriculum["temperature"],
        "learning_rate": config["grpo"]["learning_rate"],
        "save_model": bool(curriculum.get("save_model", False)),
        "jobs": int(curriculum.get("jobs") or 1),
        "reward_scheme": str(curriculum.get("reward") or "harness"),
        "stable": curriculum.get("stable"),
        "guard": curriculum.get("guard"),
        "learnable": curriculum.get("learnable"),
        "spec": _curriculum_spec(curriculum, str(config["size"])),
    }
    command = [
        "python3",
        "-c",
        f"from cuda_agent.rl.trl.single_turn import run_curriculum; run_curriculum(**{options!r})",
    ]
    notes = [
        "TRL on this node: one reply per rollout, scored by the evaluator (no tools)",
        _curriculum_note(task),
    ]
    return Plan("grpo", "trl", config, command, options, {}, notes=notes)


def _curriculum_task(config: dict[str, Any]) -> str | None:
    """The curriculum task a stage runs (None: its own problems); sets the task's policy."""
    curriculum = config.get("curriculum")
    task = curriculum.get("task") if isinstance(curriculum, dict) else None
    if not task:
        return None
    names = task_names(str(task))
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        raise RecipeError(
            f"curriculum.task {task!r}: choose from {', '.join(POLICIES)} (several joined by +)"
        )
    policies = {POLICIES[name] for name in names}
    if len(policies) > 1:
        raise RecipeError(
            f"curriculum.task {task!r}: its tasks are scored under different policies "
            f"({', '.join(sorted(policies))}); train them in separate runs"
        )
    config["evaluation"]["policy"] = policies.pop()
    return str(task)


def _curriculum_note(task: str) -> str:
    policy = POLICIES[task_names(task)[0]]
    return (
        f"curriculum task {task}: evaluated under the {policy} policy (the task's), "
        "problems from the curriculum's problem set (rl/curriculum/problem_set.py)"
    )


def _curriculum_spec(curriculum: dict[str, Any], size: str) -> dict[str, Any] | None:
    """The problem set a curriculum section names by its families and sizes (None: the
    default set, or the section's ``folder``)."""
    keys = ("families", "n_train", "n_heldout")
    chosen = {k: curriculum[k] for k in keys if curriculum.get(k) is not None}
    if not chosen:
        return None
    if "families" in chosen:
        chosen["families"] = list(chosen["families"])
    return {"size": str(curriculum.get("size") or size), **chosen}


def _plan_rft_curriculum(config: dict[str, Any], task: str) -> Plan:
    curriculum = config["curriculum"]
    options = {
        "model_path": config["model"]["path"],
        "task": task,
        "backend": config["evaluation"]["backend"],
        "out": str(curriculum["out"]),
        "folder": curriculum.get("folder"),
        "spec": _curriculum_spec(curriculum, "small"),
        "split": str(curriculum.get("split") or "train"),
        "limit": curriculum.get("limit"),
        "baselines": list(curriculum.get("baselines") or ["eager"]),
        "sampling": {
            "samples": int(curriculum["samples"]),
            "temperature": float(curriculum["temperature"]),
            "max_new_tokens": int(curriculum["max_new_tokens"]),
            "batch_prompts": int(curriculum["batch_prompts"]),
        },
        "samples_file": curriculum.get("samples_file"),
        "per_problem": int(curriculum["per_problem"]),
        "jobs": int(curriculum.get("jobs") or 1),
        "sft": dict(curriculum["sft"]),
    }
    command = [
        "python3",
        "-c",
        f"from cuda_agent.rl.trl.curriculum_rft import run_rft_options; "
        f"run_rft_options(**{options!r})",
    ]
    notes = [
        "TRL's SFT trainer on this node, on the model's own passing replies (expert iteration)",
        f"first: {curriculum['samples']} samples per problem of the {options['split']} split, "
        "each distinct answer evaluated once",
        _curriculum_note(task),
    ]
    return Plan("rft", "trl-sft", config, command, options, {}, notes=notes)


def _plan_rft(config: dict[str, Any]) -> Plan:
    task = _curriculum_task(config)
    if task:
        return _plan_rft_curriculum(config, task)
    data_file = str(Path(config["out"]) / "rft.jsonl")
    options = compat.sft_overrides(config, data_file)
    command = [
        "python3",
        "-m",
        compat.SFT_MODULE,
        *(f"{k}={_hydra(v)}" for k, v in options.items()),
    ]
    runs = " ".join(str(r) for r in config["runs"])
    notes = [
        f"first: the RFT set from {runs} into {data_file} (rules: {config['rules']})",
    ]
    return Plan("rft", "verl-sft", config, command, options, {}, notes=notes)


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise RecipeError(f"{path}: no such configuration file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise RecipeError(f"{path}: not valid YAML ({err})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: expected a mapping at the top level")
    return data


def _merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _set_dotted(config: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = config
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise RecipeError(f"override {key!r}: {part!r} is not a section")
        node = child
    node[parts[-1]] = value


def _hydra(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)
