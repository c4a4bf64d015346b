"""``CudaAgentLoop``: verl's agent loop for CUDA-Agent episodes (agentic PPO, value pretraining).

verl (0.9.1, see ``compat``) makes one instance per trajectory from the agent-loop config
file that ``cuda-agent train`` writes (``name``, ``_target_`` and our ``evaluation`` section)
and awaits ``run(sampling_params, **dataset_fields)``. Here one run is one episode:

* the environment is a temporary ``environment.KernelEnvironment``, the one ``run_episode``
  and TRL's ``KernelEnv`` drive too: a workdir made for the row's problem
  (``extra_info.problem``, else ``reward_model.ground_truth``; size ``extra_info.size``, else
  ``size``), the sandboxed shell, all the agent's tools (their schemas in the prompt) and the
  workspace tool server, with evaluations made by the ``evaluation`` section's evaluator
  (``pool``: a Ray pool of evaluation GPUs apart from verl's training and rollout GPUs, see
  ``evaluation_config``);
* the messages are the row's ``raw_prompt`` (system prompt included) with the task prompt,
  which names the workdir, added to its last user turn (a user turn is added if there is none;
  no ``raw_prompt`` at all: the agent's system prompt and the task prompt);
* turns are generated through verl's server manager, tool calls are read by verl's tool parser
  for the model family (``actor_rollout_ref.rollout.multi_turn.format``: ``hermes`` for Qwen),
  and ``token_rollout.TokenRollout`` builds the token sequence within the budgets (prompt and
  response lengths of the rollout config, ``multi_turn.max_assistant_turns`` replies);
* the reward is the harness's: the evaluator on the final workdir, and the best of that and
  the verified evaluations made during the episode (``KernelEnvironment.finish``). It is returned
  as ``reward_score``, which verl puts on the last response token (always a model token here).
  ``extra_fields`` carry ``cuda_agent`` (exit reason, turns, tool calls, format errors,
  correct, compiled, speed-ups, flags, error, which evaluation counted) and
  ``reward_extra_info`` (the same as numbers, with the same keys for every trajectory, which
  verl logs).

Blocking work (workspace, tools, evaluation) runs in a thread pool of this process so that
the event loop that verl shares between trajectories keeps going.

What it does not do: multimodal input, verl's own tools (``tool_config_path``; ours are the
agent's), partial rollouts, a wall-clock limit, keep episode folders or transcripts (they are
removed when the episode ends; diagnostics go back in ``extra_fields``).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from cuda_agent.agent.prompts import SYSTEM_PROMPT, task_prompt
from cuda_agent.agent.tools.base import ToolOutcome
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.core.types import EvalResult
from cuda_agent.environment import KernelEnvironment
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.verl import compat
from cuda_agent.rl.verl.episode_tokens import ChatTokens
from cuda_agent.rl.verl.evaluation_config import EvaluationSettings
from cuda_agent.rl.verl.token_rollout import (
    ModelTurn,
    RolloutLimits,
    RolloutRecord,
    TokenRollout,
    ToolCall,
)

_T = TypeVar("_T")
_RUNTIME = compat.runtime()
_AgentLoopBase: Any = _RUNTIME.AgentLoopBase  # verl's, or compat's stand-in
BLOCKING_THREADS = 64  # episodes' tool calls and evaluations in flight per process
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


class CudaAgentLoop(_AgentLoopBase):
    """One CUDA-Agent episode per ``run`` (see the module docstring).

    Keyword arguments beyond verl's: ``evaluation`` (the agent-loop config file's section),
    ``size`` (problem size when the row has none), ``eval_options`` / ``evaluator`` (override
    the section's; for tests and scripts), ``episode_root`` (where episode folders go),
    ``use_bwrap``, ``tool_timeout_s``, and the per-reply limits of ``RolloutLimits``.
    """

    def __init__(
        self,
        *args: Any,
        evaluation: Mapping[str, Any] | None = None,
        size: str = "standard",
        eval_options: EvalOptions | None = None,
        evaluator: Evaluator | None = None,
        episode_root: str | Path | None = None,
        use_bwrap: bool | None = None,
        tool_timeout_s: float = 600.0,
        max_output_tokens: int | None = None,
        tool_output_chars: int | None = None,
        max_format_errors: int | None = None,
        name: str | None = None,  # the registry entry's name; verl passes it along
        tools: Any = None,  # verl's own tools (ToolListWrap): not used
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        settings = EvaluationSettings.from_mapping(evaluation)
        self.backend = eval_options.backend if eval_options is not None else settings.backend
        self.eval_options = eval_options or settings.options()
        self.evaluator = evaluator or settings.evaluator()
        self.size = size
        self.episode_root = Path(episode_root) if episode_root is not None else None
        self.use_bwrap = use_bwrap
        self.tool_timeout_s = tool_timeout_s
        rollout = compat.rollout_settings(self)
        per_reply = {
            "max_output_tokens": max_output_tokens,
            "tool_output_chars": tool_output_chars,
            "max_format_errors": max_format_errors,
        }
        self.limits = RolloutLimits(
            prompt_tokens=rollout.prompt_length,
            response_tokens=rollout.response_length,
            max_turns=rollout.max_turns,
            **{k: int(v) for k, v in per_reply.items() if v is not None},
        )
        self.server, self.chat_tokenizer = compat.loop_parts(self)
        self.parser = compat.tool_parser(rollout.tool_format, self.chat_tokenizer)
        self.tool_schemas = default_tools().schemas()

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
        sample = compat.sample_fields(kwargs)
        if not sample.problem:
            raise ValueError(
                "CudaAgentLoop: the row names no problem (extra_info.problem or "
                "reward_model.ground_truth)"
            )
        env = await _blocking(
            KernelEnvironment.temporary,
            sample.problem,
            sample.size or self.size,
            self.episode_root,
            backend=self.backend,
            eval_options=self.eval_options,
            evaluator=self.evaluator,
            use_bwrap=self.use_bwrap,
            tool_timeout_s=self.tool_timeout_s,
            start={"source": "verl"},
        )
        try:
            task = task_prompt(env.problem.id, self.backend, str(env.workdir))
            messages = episode_messages(sample.raw_prompt, task)
            record = await self._episode(env, sampling_params).run(messages)
            began = asyncio.get_running_loop().time()
            score = await _blocking(env.finish)
            evaluation_s = asyncio.get_running_loop().time() - began
            reward = score.reward
            chosen, source = _counted(score.final, score.best)
        finally:
            await _blocking(env.close)
        trace = record.trace
        return compat.agent_loop_output(
            prompt_ids=trace.prompt_ids,
            response_ids=trace.response_ids,
            response_mask=trace.mask,
            response_logprobs=trace.logprobs,
            reward_score=reward,
            num_turns=record.turns + record.context_blocks + 1,  # verl counts every message
            metrics={
                "generate_sequences": record.generate_s,
                "tool_calls": record.tools_s,
                "compute_score": evaluation_s,
                "num_preempted": -1 if record.num_preempted is None else record.num_preempted,
            },
            extra_fields=diagnostics(sample.problem, record, reward, chosen, source),
        )

    def _episode(self, env: KernelEnvironment, sampling_params: dict[str, Any]) -> TokenRollout:
        request_id = uuid.uuid4().hex  # one sticky session per trajectory
        stop_tokens = compat.parser_stop_tokens(self.parser)

        async def generate(context_ids: list[int], max_tokens: int) -> ModelTurn:
            params = dict(sampling_params)
            params[compat.MAX_TOKENS_KEY] = max_tokens
            if stop_tokens:
                known = list(params.get(compat.STOP_TOKEN_IDS_KEY) or [])
                params[compat.STOP_TOKEN_IDS_KEY] = sorted({*known, *stop_tokens})
            out = await compat.generate(self.server, request_id, context_ids, params)
            return ModelTurn(
                out.token_ids, out.log_probs, out.stop_reason == "length", out.num_preempted
            )

        async def parse(token_ids: list[int]) -> tuple[str, Sequence[ToolCall]]:
            content, calls = await self.parser.extract_tool_calls(token_ids, None)
            return str(content), list(calls)

        async def run_tool(name: str, raw_arguments: str) -> ToolOutcome:
            return await _blocking(env.call_tool, name, raw_arguments)

        chat = ChatTokens(self.chat_tokenizer, self.tool_schemas)
        return TokenRollout(chat, self.limits, generate, parse, run_tool)


def episode_messages(raw_prompt: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """The row's chat with the task prompt added to its last user turn (see the module
    docstring)."""
    messages = [dict(m) for m in raw_prompt]
    if not messages:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}]
    last = messages[-1]
    if last.get("role") == "user" and isinstance(last.get("content"), str):
        last["content"] = f"{last['content']}\n\n{task}" if last["content"].strip() else task
    else:
        messages.append({"role": "user", "content": task})
    return messages


def diagnostics(
    problem: str,
    record: RolloutRecord,
    reward: float,
    chosen: EvalResult | None,
    source: str,
) -> dict[str, Any]:
    """``extra_fields`` of a trajectory: ``cuda_agent`` (details) and ``reward_extra_info``
    (numbers, same keys every time; 0.0 for a speed-up that was not measured)."""
    result = chosen
    correct = bool(result and result.correct)
    compiled = bool(result and result.compiled)
    eager = result.speedup_eager if result else None
    compile_ = result.speedup_compile if result else None
    error = result.error if result else None
    details: dict[str, Any] = {
        "problem": problem,
        "exit_reason": record.exit_reason,
        "turns": record.turns,
        "tool_calls": record.tool_calls,
        "tools_used": list(record.tool_names),
        "format_errors": record.format_errors,
        "reward": reward,
        "evaluation": source,
        "correct": correct,
        "compiled": compiled,
        "speedup_eager": eager,
        "speedup_compile": compile_,
        "flags": list(result.flags) if result else ["no_solution"],
        "error": f"{error.stage}: {error.message}" if error else None,
    }
    numbers = {
        "score": float(reward),
        "correct": float(correct),
        "compiled": float(compiled),
        "speedup_eager": float(eager or 0.0),
        "speedup_compile": float(compile_ or 0.0),
        "turns": float(record.turns),
        "tool_calls": float(record.tool_calls),
        "format_errors": float(record.format_errors),
    }
    return {
        "cuda_agent": details,
        "reward_extra_info": numbers,
        "turn_scores": [],  # the keys verl's own tool loop fills
        "tool_rewards": [],
    }


def _counted(final: EvalResult | None, best: EvalResult | None) -> tuple[EvalResult | None, str]:
    """The evaluation behind the reward (``get_reward`` takes the better of the two)."""
    if best is not None and (final is None or best.reward > final.reward):
        return best, "best"
    return final, "final" if final is not None else "none"


async def _blocking(function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(BLOCKING_THREADS, thread_name_prefix="cuda-agent-rl")
    call = functools.partial(function, *args, **kwargs)
    return await asyncio.get_running_loop().run_in_executor(_executor, call)
