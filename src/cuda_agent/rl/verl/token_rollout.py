"""One agent rollout at the token level, turn by turn, within turn and token budgets.

``TokenRollout.run(messages)`` is the ReAct loop of ``agent.loop.run_loop`` rewritten for an
RL rollout: the model is a token-in/token-out ``generate`` (the rollout server), its tool
calls are found by ``parse`` (a tool parser for the model family), tools run through
``run_tool`` (the episode's environment), and everything is recorded as one ``TokenTrace``:
the prompt, then the model's tokens (mask 1, with their log-probs) and the context tokens
between turns (mask 0, log-prob 0.0): tool results, the nudge after a cut-off reply, turn
boundaries. The exits are the agent loop's (``EXIT_REASONS``): ``submitted`` (a reply without
a tool call), ``turn_limit``, ``token_budget`` and ``format_errors`` (too many malformed calls
or cut-off replies in a row, counted as ``run_loop`` counts them).

Budgets, and how the trace is cut:

* the prompt must fit ``prompt_tokens`` (an error otherwise: cutting it would drop the task);
* every request asks for at most ``min(room left, max_output_tokens)`` new tokens, and a
  server that returns more is cut there, so the response never exceeds ``response_tokens``;
* the response always ends with a model token: context is appended only when another reply
  follows and at least one token is left for it. A trainer puts the outcome reward on the last
  response token, and PPO's masked GAE would drop a reward placed on a mask-0 token;
* the tool calls of every reply are run (as ``run_loop`` does, also on the last turn, since
  they change the workdir that is evaluated), except those of a reply that used up the whole
  token budget (``run_loop`` does not act on a reply past its budget either).

What it does not do: build the environment or compute the reward (the verl adapter does,
with ``environment.KernelEnvironment``), a wall-clock limit (the trainer has its own
timeouts), parallel tool calls (calls run in order), or count malformed calls the parser could
not read at all (verl's parsers drop them; such a reply counts as a plain reply).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cuda_agent.agent.loop import CUT_OFF_NUDGE, AgentLimits
from cuda_agent.agent.tools.base import ToolOutcome
from cuda_agent.agent.truncate import truncate_output
from cuda_agent.rl.verl.episode_tokens import ChatTokens, TokenTrace

_DEFAULTS = AgentLimits()


@dataclass(frozen=True)
class RolloutLimits:
    prompt_tokens: int
    response_tokens: int
    max_turns: int | None = None  # model replies; None: no limit but the token budget
    max_output_tokens: int = _DEFAULTS.max_output_tokens  # per reply
    tool_output_chars: int = _DEFAULTS.tool_output_chars
    max_format_errors: int = _DEFAULTS.max_format_errors


@dataclass(frozen=True)
class ModelTurn:
    """What the rollout server gave for one request."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    cut_off: bool = False  # the server says it stopped at the token limit
    num_preempted: int | None = None


class ToolCall(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> str: ...


Generate = Callable[[list[int], int], Awaitable[ModelTurn]]  # (context ids, max new tokens)
Parse = Callable[[list[int]], Awaitable[tuple[str, Sequence[ToolCall]]]]  # -> content, calls
RunTool = Callable[[str, str], Awaitable[ToolOutcome]]  # (name, raw JSON arguments)


@dataclass
class RolloutRecord:
    trace: TokenTrace
    messages: list[dict[str, Any]]
    exit_reason: str = ""
    turns: int = 0  # model replies
    tool_calls: int = 0
    format_errors: int = 0  # malformed calls and cut-off replies, in all
    context_blocks: int = 0  # context inserted between replies
    generate_s: float = 0.0
    tools_s: float = 0.0
    num_preempted: int | None = None
    tool_names: list[str] = field(default_factory=list)


class TokenRollout:
    def __init__(
        self,
        chat: ChatTokens,
        limits: RolloutLimits,
        generate: Generate,
        parse: Parse,
        run_tool: RunTool,
    ) -> None:
        self.chat, self.limits = chat, limits
        self.generate, self.parse, self.run_tool = generate, parse, run_tool

    async def run(self, messages: list[dict[str, Any]]) -> RolloutRecord:
        """Drive the conversation in ``messages`` (appended in place) until an exit."""
        limits = self.limits
        trace = TokenTrace(self.chat.prompt_ids(messages))
        if len(trace.prompt_ids) > limits.prompt_tokens:
            raise ValueError(
                f"the prompt has {len(trace.prompt_ids)} tokens, more than the "
                f"{limits.prompt_tokens} allowed (raise the prompt length)"
            )
        record = RolloutRecord(trace, messages)
        streak = 0  # malformed calls / cut-off replies in a row
        while True:
            if limits.max_turns is not None and record.turns >= limits.max_turns:
                return _exit(record, "turn_limit")
            room = limits.response_tokens - len(trace.response_ids)
            if room <= 0:
                return _exit(record, "token_budget")
            ask = min(room, limits.max_output_tokens)
            began = time.monotonic()
            turn = await self.generate(trace.context_ids, ask)
            record.generate_s += time.monotonic() - began
            if turn.num_preempted is not None:
                record.num_preempted = (record.num_preempted or 0) + turn.num_preempted
            ids = turn.token_ids[:ask]
            logprobs = turn.log_probs[:ask] if turn.log_probs is not None else None
            cut_off = turn.cut_off or len(turn.token_ids) >= ask
            trace.add_model(ids, logprobs)
            record.turns += 1
            content, calls = await self.parse(ids)
            messages.append(_assistant_message(content, calls))
            if len(trace.response_ids) >= limits.response_tokens:
                return _exit(record, "token_budget")
            if calls:
                appended = []
                for call in calls:
                    outcome = await self._tool(record, call)
                    streak = streak + 1 if outcome.format_error else 0
                    text = truncate_output(outcome.text, limits.tool_output_chars)
                    appended.append({"role": "tool", "content": text})
            elif cut_off:
                streak += 1
                record.format_errors += 1
                appended = [{"role": "user", "content": CUT_OFF_NUDGE}]
            else:
                return _exit(record, "submitted")
            messages.extend(appended)
            if streak >= limits.max_format_errors:
                return _exit(record, "format_errors")
            if limits.max_turns is not None and record.turns >= limits.max_turns:
                return _exit(record, "turn_limit")
            context = self.chat.context_ids(ids, appended)
            if len(trace.response_ids) + len(context) >= limits.response_tokens:
                return _exit(record, "token_budget")  # no room for another reply after it
            trace.add_context(context)
            record.context_blocks += 1

    async def _tool(self, record: RolloutRecord, call: ToolCall) -> ToolOutcome:
        began = time.monotonic()
        outcome = await self.run_tool(call.name, call.arguments)
        record.tools_s += time.monotonic() - began
        record.tool_calls += 1
        record.tool_names.append(call.name)
        if outcome.format_error:
            record.format_errors += 1
        return outcome


def _assistant_message(content: str, calls: Sequence[ToolCall]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return message


def _exit(record: RolloutRecord, reason: str) -> RolloutRecord:
    record.exit_reason = reason
    return record
