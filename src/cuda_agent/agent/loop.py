"""The ReAct loop: the model thinks and calls tools until it stops or a limit is reached.

Every exit is explicit and recorded (``EXIT_REASONS``): the model replied without a tool call
(``submitted``), the turn limit, the context-token budget, the wall-clock limit, too many
malformed tool calls in a row, a model that could not answer, a server whose context window
was exceeded even after trimming (``context_overflow``), or a refusal (``refused``). Tokens
are counted from the server's usage reports (prompt + completion = the context in use), or
estimated without them; the loop stops before a request would exceed the budget. When the
server answers with a context-length error, the oldest tool outputs are trimmed
(``context_trim``) and the turn is asked once more. Tool output is truncated (errors first,
then head and tail) before it goes back to the model. What the client adapted to (``notes``
of a turn) is recorded as ``model_note`` events; each assistant message carries the reasoning
the server returned (``reasoning_content``) and the tool-call form used (``tool_format``);
where the client took tool calls or reasoning out of the reply's text, the event keeps that
text as the server returned it (``raw_content``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from cuda_agent.agent.context_trim import trim_tool_outputs
from cuda_agent.agent.models import (
    AssistantTurn,
    ChatModel,
    ContextOverflow,
    ModelError,
    estimate_tokens,
)
from cuda_agent.agent.tools.base import ToolContext, ToolRegistry
from cuda_agent.agent.trajectory import Trajectory
from cuda_agent.agent.truncate import truncate_output

EXIT_REASONS = (
    "submitted",
    "turn_limit",
    "token_budget",
    "wall_clock",
    "format_errors",
    "model_error",
    "context_overflow",
    "refused",
)
CUT_OFF_NUDGE = (
    "Your reply was cut off by the output limit before it finished. Continue, "
    "and keep each reply shorter (write long files in several edits)."
)


@dataclass
class AgentLimits:
    max_turns: int = 200
    context_tokens: int = 131_072
    max_output_tokens: int = 16_384
    wall_clock_s: float = 6 * 3600.0
    tool_timeout_s: float = 600.0
    max_format_errors: int = 5
    tool_output_chars: int = 16_000


@dataclass
class LoopResult:
    exit_reason: str
    turns: int
    context_tokens: int
    completion_tokens: int
    detail: str = ""


def run_loop(
    model: ChatModel,
    registry: ToolRegistry,
    context: ToolContext,
    messages: list[dict[str, Any]],
    limits: AgentLimits,
    trajectory: Trajectory,
    turns_done: int = 0,
) -> LoopResult:
    """Drive the conversation in ``messages`` (appended in place) until an exit."""
    start = time.monotonic()
    schemas = registry.schemas()
    turns, completion_total, format_errors = turns_done, 0, 0
    context_tokens = estimate_tokens(messages)

    def finish(reason: str, detail: str = "") -> LoopResult:
        trajectory.event(
            "exit",
            reason=reason,
            turns=turns,
            context_tokens=context_tokens,
            completion_tokens=completion_total,
            detail=detail,
        )
        return LoopResult(reason, turns, context_tokens, completion_total, detail)

    while True:
        if turns >= limits.max_turns:
            return finish("turn_limit")
        if time.monotonic() - start > limits.wall_clock_s:
            return finish("wall_clock")
        if context_tokens + limits.max_output_tokens > limits.context_tokens:
            return finish("token_budget", f"{context_tokens} tokens in context")
        try:
            reply = _ask(model, messages, schemas, limits, trajectory)
        except _Exit as stop:
            return finish(stop.reason, stop.detail)
        turns += 1
        message = reply.as_message()
        messages.append(message)
        for note in reply.notes:
            trajectory.event("model_note", note=note, turn=turns)
        raw = {"raw_content": reply.raw_content} if reply.raw_content is not None else {}
        trajectory.event(
            "message",
            message=message,
            turn=turns,
            finish_reason=reply.finish_reason,
            tool_format=reply.tool_format,
            **raw,
        )
        if reply.usage is not None:
            context_tokens = reply.usage.total
            completion_total += reply.usage.completion_tokens
            trajectory.event(
                "usage",
                prompt=reply.usage.prompt_tokens,
                completion=reply.usage.completion_tokens,
                estimated=reply.usage.estimated,
            )
        else:
            context_tokens = estimate_tokens(messages)
        if context_tokens > limits.context_tokens:
            return finish("token_budget", f"{context_tokens} tokens in context")
        if reply.refusal and not reply.tool_calls:
            return finish("refused", reply.refusal[:500])
        if not reply.tool_calls:
            if reply.finish_reason == "length":
                format_errors += 1
                if format_errors >= limits.max_format_errors:
                    return finish("format_errors", "replies kept being cut off")
                _append(messages, trajectory, {"role": "user", "content": CUT_OFF_NUDGE})
                context_tokens += estimate_tokens([messages[-1]])
                continue
            return finish("submitted")
        for call in reply.tool_calls:
            began = time.monotonic()
            outcome = registry.call(context, call.name, call.arguments)
            text = truncate_output(outcome.text, limits.tool_output_chars)
            tool_message = {"role": "tool", "tool_call_id": call.id, "content": text}
            messages.append(tool_message)
            trajectory.event(
                "tool_result",
                message=tool_message,
                name=call.name,
                is_error=outcome.is_error,
                full_chars=len(outcome.text),
                seconds=round(time.monotonic() - began, 3),
            )
            context_tokens += estimate_tokens([tool_message])
            format_errors = format_errors + 1 if outcome.format_error else 0
            if format_errors >= limits.max_format_errors:
                return finish("format_errors", f"{format_errors} malformed tool calls in a row")


def _append(
    messages: list[dict[str, Any]], trajectory: Trajectory, message: dict[str, Any]
) -> None:
    messages.append(message)
    trajectory.event("message", message=message)


class _Exit(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _ask(
    model: ChatModel,
    messages: list[dict[str, Any]],
    schemas: list[dict[str, Any]],
    limits: AgentLimits,
    trajectory: Trajectory,
) -> AssistantTurn:
    """One reply; on a context-length error the oldest tool outputs are trimmed and the turn
    is asked once more. ``_Exit`` when there is no reply."""
    try:
        return model.complete(messages, schemas, limits.max_output_tokens)
    except ContextOverflow as overflow:
        trim = trim_tool_outputs(messages, overflow, limits.max_output_tokens)
        trajectory.event(
            "context_trim",
            outputs=trim.outputs,
            chars=trim.chars,
            target_tokens=trim.target_tokens,
            server=overflow.counts(),
        )
        if not trim.outputs:
            detail = f"{overflow.counts()}; no tool output to trim"
            raise _Exit("context_overflow", detail) from None
        try:
            return model.complete(messages, schemas, limits.max_output_tokens)
        except ContextOverflow as again:
            raise _Exit(
                "context_overflow",
                f"{again.counts()} after trimming {trim.outputs} tool output(s)",
            ) from None
        except ModelError as err:
            raise _Exit("model_error", str(err)) from None
    except ModelError as err:
        raise _Exit("model_error", str(err)) from None
