"""Chat models with function calling: any OpenAI-compatible endpoint, or a scripted replay.

``OpenAIChatModel`` talks to vLLM, SGLang or a hosted API through the ``openai`` client (base
URL, model name, API key from an environment variable), retrying transient failures with
exponential backoff; where ``openai`` is not installed (a fixed GPU image) the same requests go
through the standard library's HTTP client. ``ScriptedModel`` replays recorded assistant
messages, for tests and the demo. Token usage comes from the server's usage report when there
is one, else from a character-count estimate.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class ModelError(Exception):
    """The model could not produce a reply (after retries)."""


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

    def as_message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.content or ""}
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


class ChatModel(Protocol):
    name: str

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> AssistantTurn: ...


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """About four characters a token, plus a little per message (used without usage data)."""
    chars = 0
    for message in messages:
        chars += len(str(message.get("content") or "")) + 16
        for call in message.get("tool_calls") or []:
            chars += len(call["function"]["name"]) + len(call["function"]["arguments"])
    return math.ceil(chars / 4)


def parse_completion(data: dict[str, Any]) -> AssistantTurn:
    """An OpenAI chat-completion response (as a dict) -> AssistantTurn."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"malformed response: {str(data)[:300]}") from None
    calls = [
        ToolCall(
            id=c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            name=c["function"]["name"],
            arguments=c["function"].get("arguments") or "{}",
        )
        for c in message.get("tool_calls") or []
    ]
    usage = data.get("usage") or None
    return AssistantTurn(
        content=message.get("content"),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason") or "stop",
        usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0)))
        if usage
        else None,
    )


class OpenAIChatModel:
    """An OpenAI-compatible chat endpoint (``/v1/chat/completions``) with function calling."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str,
        max_retries: int = 5,
        timeout_s: float = 600.0,
        temperature: float | None = None,
        backoff_s: float = 1.0,
    ) -> None:
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or "EMPTY"
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.backoff_s = backoff_s

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> AssistantTurn:
        body: dict[str, Any] = {
            "model": self.name,
            "messages": messages,
            "max_tokens": max_tokens,
        }
        if tools:  # hosted APIs reject an empty tool list
            body["tools"] = tools
        if self.temperature is not None:
            body["temperature"] = self.temperature
        last_error = ""
        for attempt in range(self.max_retries + 1):
            try:
                return parse_completion(self._post(body))
            except _Transient as err:
                last_error = str(err)
                if attempt < self.max_retries:
                    time.sleep(self.backoff_s * (2**attempt))
        raise ModelError(f"gave up after {self.max_retries + 1} attempts: {last_error}")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            import openai
        except ImportError:
            return self._post_stdlib(body)
        client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=self.timeout_s
        )
        try:
            response = client.chat.completions.create(**body)
        except (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        ) as err:
            raise _Transient(f"{type(err).__name__}: {err}") from None
        except openai.APIStatusError as err:
            if err.status_code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {err.status_code}") from None
            raise ModelError(f"HTTP {err.status_code}: {str(err)[:300]}") from None
        return response.model_dump()

    def _post_stdlib(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as err:
            if err.code in TRANSIENT_STATUS:
                raise _Transient(f"HTTP {err.code}") from None
            raise ModelError(f"HTTP {err.code}: {err.read()[:300]!r}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
            raise _Transient(str(err)) from None


class _Transient(Exception):
    pass


class ScriptedModel:
    """Replays assistant turns in order; when they run out, replies with a final message."""

    def __init__(self, turns: list[dict[str, Any]], name: str = "scripted") -> None:
        self.name = name
        self.turns = list(turns)
        self.calls = 0

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> AssistantTurn:
        if self.calls >= len(self.turns):
            turn: dict[str, Any] = {"content": "(the script has no more turns)"}
        else:
            turn = self.turns[self.calls]
        self.calls += 1
        reply = scripted_turn(turn, self.calls)
        prompt = estimate_tokens(messages)
        reply.usage = Usage(prompt, estimate_tokens([reply.as_message()]), estimated=True)
        return reply


def scripted_turn(turn: dict[str, Any], index: int) -> AssistantTurn:
    """A replay-script entry (``content`` and ``tool_calls`` with object arguments)."""
    calls = []
    for j, call in enumerate(turn.get("tool_calls") or []):
        arguments = call.get("arguments", {})
        calls.append(
            ToolCall(
                id=call.get("id") or f"call_{index}_{j}",
                name=call["name"],
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
    return AssistantTurn(
        content=turn.get("content"),
        tool_calls=calls,
        finish_reason=turn.get("finish_reason") or ("tool_calls" if calls else "stop"),
    )
