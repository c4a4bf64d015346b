"""Every verl name CUDA Agent uses, in one place, for one pinned verl version.

verl configures itself with Hydra: a run is ``python3 -m verl.trainer.main_ppo`` followed by
``dotted.key=value`` overrides of its ``ppo_trainer.yaml``. ``ppo_overrides`` turns one of our
stage configurations into those overrides; nothing else in the package spells a verl key. When
verl renames a key, this file (and ``VERL_VERSION``) is what changes. The keys were read from
verl 0.9.1's ``verl/trainer/config/_generated_ppo_trainer.yaml``.

The run-time names the verl adapters need (``AgentLoopBase``, ``AgentLoopOutput``,
``TokenOutput``, ``ToolParser``, ``DictConfigWrap``, ``ToolListWrap``; the rollout config keys;
the dataset fields; the server manager's ``generate``) come from ``runtime()``: verl's own
classes when verl imports, else stand-ins written here with exactly verl 0.9.1's names,
signatures and field names (read from ``verl/experimental/agent_loop/agent_loop.py``,
``tool_parser.py`` and ``verl/workers/rollout/replica.py``). The stand-ins let the adapters
import and be tested where verl is not installed (verl 0.9.1 pins transformers < 5.11; our
lock has 5.24); they are not a verl: there is no trainer, no server, and the only tool parser
is a ``hermes`` one of our own. verl is imported on the first ``runtime()`` call, not at
import time (the recipe needs none of it).

Not here: running verl (``recipe.py`` builds the command; the user's cluster runs it).
"""

from __future__ import annotations

import abc
import functools
import importlib.util
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

VERL_VERSION = "0.9.1"
PPO_MODULE = "verl.trainer.main_ppo"
SFT_MODULE = "verl.trainer.sft_trainer"
AGENT_LOOP_NAME = "cuda_agent"  # our AgentLoopBase subclass's registered name
AGENT_LOOP_CLASS = "cuda_agent.rl.verl.agent_loop.CudaAgentLoop"
# verl's custom reward function (``reward.custom_reward_function``; the top-level
# ``custom_reward_function`` of older versions is migrated there by 0.9.1): our single-turn
# reward, loaded with verl's ``load_extern_object`` from a ``pkg://`` module path.
# verl's RL dataset columns (verl/utils/dataset/rl_dataset.py and the agent-loop worker)
DATA_SOURCE_KEY = "data_source"
PROMPT_KEY = "prompt"
REWARD_MODEL_KEY = "reward_model"
EXTRA_INFO_KEY = "extra_info"
AGENT_NAME_KEY = "agent_name"  # which registered agent loop runs the row
REWARD_FUNCTION_PATH = "pkg://cuda_agent.rl.verl.reward"
REWARD_FUNCTION_NAME = "compute_score"


def ppo_overrides(
    config: dict[str, Any], agent_loop_config: str | None, train_file: str | None = None
) -> dict[str, Any]:
    """verl ``main_ppo`` overrides for a single-turn, value-pretrain or agentic-ppo stage
    (``train_file``: the verl dataset made from ``data.train``; by default ``data.train``)."""
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
        "data.train_files": train_file or config["data"]["train"],
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
    if not multi_turn:
        out.update(reward_overrides(config["evaluation"]))
    return out


def reward_overrides(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The single-turn reward: our ``compute_score``, and the ``evaluation`` section as its
    ``reward_kwargs`` (verl passes them to every call; ``+``: keys verl's config lacks)."""
    out: dict[str, Any] = {
        "reward.custom_reward_function.path": REWARD_FUNCTION_PATH,
        "reward.custom_reward_function.name": REWARD_FUNCTION_NAME,
    }
    for key in ("backend", "policy", "baselines", "pool"):
        if evaluation.get(key) is not None:
            out[f"+reward.custom_reward_function.reward_kwargs.{key}"] = evaluation[key]
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


# -- run time: verl's classes, or stand-ins with verl 0.9.1's names ------------------------------

# Sampling-parameter keys verl's rollout servers read (vLLM and SGLang servers alike).
MAX_TOKENS_KEY = "max_tokens"
STOP_TOKEN_IDS_KEY = "stop_token_ids"


@functools.cache
def runtime() -> SimpleNamespace:
    """verl's run-time classes (``available=True``) when verl is installed, else the stand-ins
    below (``False``). An installed verl that fails to import raises: no silent stand-ins."""
    if importlib.util.find_spec("verl") is None:
        return SimpleNamespace(
            available=False,
            AgentLoopBase=_AgentLoopBase,
            AgentLoopOutput=_AgentLoopOutput,
            TokenOutput=_TokenOutput,
            ToolParser=_ToolParser,
            DictConfigWrap=_DictConfigWrap,
            ToolListWrap=_ToolListWrap,
            make_config=_Config.of,
        )
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopOutput,
        DictConfigWrap,
        ToolListWrap,
    )
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.workers.rollout.replica import TokenOutput

    return SimpleNamespace(
        available=True,
        AgentLoopBase=AgentLoopBase,
        AgentLoopOutput=AgentLoopOutput,
        TokenOutput=TokenOutput,
        ToolParser=ToolParser,
        DictConfigWrap=DictConfigWrap,
        ToolListWrap=ToolListWrap,
        make_config=OmegaConf.create,
    )


@dataclass(frozen=True)
class RolloutSettings:
    """What the agent loop reads from ``actor_rollout_ref.rollout``."""

    prompt_length: int
    response_length: int
    max_turns: int | None  # multi_turn.max_assistant_turns (None: no limit of its own)
    tool_format: str  # multi_turn.format: the tool parser's registered name


def rollout_settings(loop: Any) -> RolloutSettings:
    """From an ``AgentLoopBase``'s ``rollout_config`` (verl's or a stand-in's)."""
    rollout = loop.rollout_config
    multi_turn = rollout.multi_turn
    turns = multi_turn.max_assistant_turns
    return RolloutSettings(
        prompt_length=int(rollout.prompt_length),
        response_length=int(rollout.response_length),
        max_turns=int(turns) if turns else None,
        tool_format=str(multi_turn.format or "hermes"),
    )


def loop_parts(loop: Any) -> tuple[Any, Any]:
    """An ``AgentLoopBase``'s server manager and tokenizer."""
    return loop.server_manager, loop.tokenizer


@dataclass(frozen=True)
class Sample:
    """The dataset fields of one trajectory that the agent loop uses."""

    raw_prompt: list[dict[str, Any]]
    problem: str | None  # extra_info.problem, else reward_model.ground_truth
    size: str | None  # extra_info.size


def sample_fields(kwargs: Mapping[str, Any]) -> Sample:
    """From the keyword arguments verl passes to ``AgentLoopBase.run`` (the dataset row's
    non-tensor fields: ``raw_prompt`` with ``data.return_raw_chat``, ``extra_info``,
    ``reward_model``)."""
    raw = kwargs.get("raw_prompt")
    extra = kwargs.get("extra_info") or {}
    reward_model = kwargs.get("reward_model") or {}
    problem = extra.get("problem") or reward_model.get("ground_truth")
    size = extra.get("size")
    return Sample(
        raw_prompt=[dict(m) for m in raw] if raw is not None else [],
        problem=str(problem) if problem else None,
        size=str(size) if size else None,
    )


@dataclass(frozen=True)
class Generated:
    token_ids: list[int]
    log_probs: list[float] | None
    stop_reason: str | None  # "completed", "aborted", "length" or None
    num_preempted: int | None


async def generate(
    server_manager: Any, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any]
) -> Generated:
    """One turn through verl's ``LLMServerClient.generate`` (keyword-only after the request
    id; returns a ``TokenOutput``)."""
    out = await server_manager.generate(
        request_id=request_id, prompt_ids=prompt_ids, sampling_params=sampling_params
    )
    token_ids = [int(t) for t in out.token_ids]
    log_probs = getattr(out, "log_probs", None)
    if log_probs is not None and not log_probs and token_ids:
        log_probs = None  # verl's client returns [] when log-probs were not asked for
    return Generated(
        token_ids=token_ids,
        log_probs=[float(x) for x in log_probs] if log_probs is not None else None,
        stop_reason=getattr(out, "stop_reason", None),
        num_preempted=getattr(out, "num_preempted", None),
    )


def tool_parser(name: str, tokenizer: Any) -> Any:
    """verl's ``ToolParser.get_tool_parser``: ``await parser.extract_tool_calls(ids, tools)``
    gives ``(content, [FunctionCall(name, arguments: JSON str, tool_call_id)])``."""
    return runtime().ToolParser.get_tool_parser(name, tokenizer)


def parser_stop_tokens(parser: Any) -> list[int]:
    return list(getattr(parser, "stop_token_ids", None) or [])


def agent_loop_output(
    *,
    prompt_ids: list[int],
    response_ids: list[int],
    response_mask: list[int],
    response_logprobs: list[float] | None,
    reward_score: float,
    num_turns: int,
    metrics: dict[str, float | int],
    extra_fields: dict[str, Any],
) -> Any:
    """verl's ``AgentLoopOutput`` (``reward_score`` goes on the last response token)."""
    return runtime().AgentLoopOutput(
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        response_mask=response_mask,
        response_logprobs=response_logprobs,
        reward_score=reward_score,
        num_turns=num_turns,
        metrics=metrics,
        extra_fields=extra_fields,
    )


def make_agent_loop(
    cls: type, config: Mapping[str, Any], server_manager: Any, tokenizer: Any, **extra: Any
) -> Any:
    """An agent loop built the way verl's ``AgentLoopWorker`` builds one per trajectory (its
    ``hydra.utils.instantiate`` keyword arguments), from a plain ``config`` mapping with at
    least ``actor_rollout_ref.rollout`` and ``data``; ``extra`` are the agent-loop config
    file's keys (``evaluation``...). For tests and scripts; verl does this itself."""
    rt = runtime()
    trainer_config = rt.make_config(dict(config))
    return cls(
        trainer_config=rt.DictConfigWrap(trainer_config),
        server_manager=server_manager,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type=None,
        dataset_cls=None,
        data_config=rt.DictConfigWrap(trainer_config.data),
        tools=rt.ToolListWrap([]),
        **extra,
    )


# -- stand-ins (used only when verl does not import) -------------------------------------------


class _Config(dict[str, Any]):
    """A nested mapping read by attribute, like the OmegaConf nodes verl passes around."""

    @classmethod
    def of(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return cls({k: cls.of(v) for k, v in value.items()})
        if isinstance(value, list | tuple):
            return [cls.of(v) for v in value]
        return value

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class _DictConfigWrap:
    def __init__(self, config: Any) -> None:
        self.config = config


class _ToolListWrap:
    def __init__(self, tools: list[Any]) -> None:
        self.tools = tools


class _AgentLoopBase(abc.ABC):
    """verl 0.9.1's ``AgentLoopBase`` constructor signature and attributes, nothing else."""

    def __init__(
        self,
        trainer_config: Any,
        server_manager: Any,
        tokenizer: Any,
        processor: Any,
        dataset_cls: Any,
        data_config: Any,
        hf_model_type: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.data_config = data_config.config

    @abc.abstractmethod
    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any: ...


@dataclass
class _AgentLoopOutput:
    """verl 0.9.1's ``AgentLoopOutput`` fields (a pydantic model there)."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    metrics: dict[str, Any]
    response_logprobs: list[float] | None = None
    routed_experts: Any = None
    multi_modal_data: dict[str, Any] | None = None
    reward_score: float | None = None
    num_turns: int = 0
    extra_fields: dict[str, Any] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] | None = None
    mm_processor_output: list[dict[str, Any]] | None = None


@dataclass
class _TokenOutput:
    """verl 0.9.1's ``TokenOutput`` fields (a pydantic model there)."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    routed_experts: Any = None
    stop_reason: str | None = None
    num_preempted: int | None = None
    extra_fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class _FunctionCall:
    arguments: str
    name: str
    tool_call_id: str | None = None


class _HermesParser:
    """Our own ``hermes`` format reader: each ``<tool_call>{"name": ..., "arguments": {...}}
    </tool_call>`` block of the decoded reply is one call; blocks that are not such JSON are
    dropped (as verl's parser does); the content is the reply without the blocks."""

    _BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
    stop_token_ids: list[int] = []  # noqa: RUF012 (read-only, as verl's property)

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    async def extract_tool_calls(
        self, responses_ids: list[int], tools: list[Any] | None = None
    ) -> tuple[str, list[_FunctionCall]]:
        text = self.tokenizer.decode(responses_ids)
        calls = []
        for block in self._BLOCK.findall(text):
            try:
                call = json.loads(block)
                calls.append(
                    _FunctionCall(
                        name=str(call["name"]),
                        arguments=json.dumps(call["arguments"], ensure_ascii=False),
                    )
                )
            except (ValueError, KeyError, TypeError):
                continue
        return self._BLOCK.sub("", text), calls


class _ToolParser:
    _parsers: dict[str, type[_HermesParser]] = {"hermes": _HermesParser}  # noqa: RUF012

    @classmethod
    def get_tool_parser(cls, name: str, tokenizer: Any) -> _HermesParser:
        if name not in cls._parsers:
            raise ValueError(f"Unknown tool parser: {name} (the stand-in knows only hermes)")
        return cls._parsers[name](tokenizer)
