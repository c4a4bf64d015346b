"""The records a chat model hands the agent loop: a turn, its tool calls, usage, errors.

``AssistantTurn`` is one reply in the loop's own form, whatever the server spoke: visible
``content``, ``tool_calls`` (native, or parsed from text), the ``reasoning`` the server
returned apart (``reasoning_content`` / ``reasoning``, or ``<think>`` taken out of the text), a
``refusal`` (OpenAI's refusal field), the tool-call form the reply used (``tool_format``),
``notes`` on what the client had to adapt to, and the text as the server returned it
(``raw_content``) where calls or reasoning were taken out of it. ``as_message`` writes it as
the OpenAI-format assistant message that the trajectory keeps (reasoning as
``reasoning_content``, the name chat templates read). ``ModelError`` is a reply that could
not be had; ``ContextOverflow`` the server's context window being exceeded, with the token
counts its message gave.

What it does not do: talk to a server (``models``, ``wire``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


class ModelError(Exception):
    """The model could not produce a reply (after retries)."""


class ContextOverflow(ModelError):
    """The request did not fit the server's context window (HTTP 400 with its message)."""

    def __init__(
        self,
        message: str,
        limit: int | None = None,
        requested: int | None = None,
        prompt: int | None = None,
    ) -> None:
        super().__init__(message)
        self.limit = limit  # the server's context window, in its tokens
        self.requested = requested  # prompt + completion tokens the request needed
        self.prompt = prompt  # the prompt's tokens, where the message gives them

    def counts(self) -> str:
        """The token counts, as far as the server's message gave them."""
        parts = []
        if self.limit is not None:
            parts.append(f"context window {self.limit} tokens")
        if self.requested is not None:
            parts.append(f"request {self.requested} tokens")
        if self.prompt is not None:
            parts.append(f"prompt {self.prompt} tokens")
        return ", ".join(parts) or "token counts not given by the server"


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str


@dataclass
class Usage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class AssistantTurn:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage | None = None
    reasoning: str | None = None
    refusal: str | None = None
    tool_format: str = "native"
    notes: list[str] = field(default_factory=list)
    # the reply's text as the server returned it, when the client took tool calls or
    # reasoning out of it (``content`` is what is left); None when ``content`` is that text
    raw_content: str | None = None

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.refusal:
            message["refusal"] = self.refusal
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.tool_calls
            ]
        return message


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """About four characters a token, plus a little per message (used without usage data)."""
    chars = 0
    for message in messages:
        chars += len(str(message.get("content") or "")) + 16
        chars += len(str(message.get("reasoning_content") or ""))
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    return math.ceil(chars / 4)
