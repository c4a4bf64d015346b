"""Chat models with function calling: any OpenAI-compatible endpoint, or a scripted replay.

``OpenAIChatModel`` talks to vLLM, SGLang, llama.cpp, Ollama, ``transformers serve`` or a
hosted API (base URL, model name, API key), plain or streamed (``wire``), retrying transient
failures with exponential backoff. It adapts to what the server documents, once per client:

* a model that refuses ``max_tokens`` (OpenAI's reasoning models) gets
  ``max_completion_tokens``; one that refuses ``temperature`` gets none;
* tool calls (``tool_format``): ``native`` sends ``tools`` and reads ``tool_calls``;
  ``hermes`` / ``json`` put the schemas in the system message and read calls from the text
  (``tool_text``); ``auto`` starts native and, when the server rejects ``tools`` (vLLM or
  llama.cpp without a tool parser, an Ollama model without tools) or answers with calls
  written in ``content``, goes on in the text form the model used. The conversation is kept in
  the native form either way; it is rewritten for the wire on each request;
* reasoning returned apart (``reasoning_content``: DeepSeek, SGLang, llama.cpp, older vLLM;
  ``reasoning``: vLLM >= 0.11, Ollama) or left as ``<think>`` in ``content`` is kept in the
  turn; it is sent back under the server's own field name (DeepSeek requires it on tool-call
  turns) and never to a server that did not return it;
* ``refusal`` is kept; a context-length error raises ``ContextOverflow`` with its counts.

Each adaptation is reported once in the turn's ``notes`` (with the server-side fix).
``ScriptedModel`` replays recorded assistant messages, for tests and the demo. Token usage
comes from the server's usage report when there is one, else from a character-count estimate.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from cuda_agent.agent import server_errors, tool_text, wire
from cuda_agent.agent.chat_types import (
    AssistantTurn,
    ContextOverflow,
    ModelError,
    ToolCall,
    Usage,
    estimate_tokens,
)

__all__ = [
    "TOOL_FORMATS",
    "AssistantTurn",
    "ChatModel",
    "ContextOverflow",
    "ModelError",
    "OpenAIChatModel",
    "ScriptedModel",
    "ToolCall",
    "Usage",
    "estimate_tokens",
    "parse_completion",
    "scripted_turn",
]

log = logging.getLogger(__name__)
TOOL_FORMATS = ("auto", "native", "hermes", "json")
REASONING_KEYS = ("reasoning_content", "reasoning")


class ChatModel(Protocol):
    name: str

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> AssistantTurn: ...


def parse_completion(data: dict[str, Any]) -> AssistantTurn:
    """An OpenAI chat-completion response (as a dict) -> AssistantTurn (native tool calls)."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise ModelError(f"malformed response: {str(data)[:300]}") from None
    calls = [
        ToolCall(
            id=c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            name=(c.get("function") or {}).get("name") or "",
            arguments=(c.get("function") or {}).get("arguments") or "{}",
        )
        for c in message.get("tool_calls") or []
    ]
    reasoning = next((message[k] for k in REASONING_KEYS if message.get(k)), None)
    usage = data.get("usage") or None
    return AssistantTurn(
        content=message.get("content"),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason") or "stop",
        usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
        if usage
        else None,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        refusal=message.get("refusal") or None,
    )


# how a transient endpoint failure is retried unless told otherwise (``solve --retries``,
# ``--retry-backoff``): five retries, the first after a second, each later wait doubled
DEFAULT_RETRIES = 5
DEFAULT_BACKOFF_S = 1.0


class OpenAIChatModel:
    """An OpenAI-compatible chat endpoint (``/v1/chat/completions``) with function calling."""

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str,
        max_retries: int = DEFAULT_RETRIES,
        timeout_s: float = 600.0,
        temperature: float | None = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
        tool_format: str = "auto",
        stream: bool = False,
        transport: str = "auto",
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        """``on_retry`` gets one line before each retry of a transient failure: what failed
        and when the next attempt comes (a CLI prints it, so a wait is never silent)."""
        if tool_format not in TOOL_FORMATS:
            raise ValueError(f"tool format {tool_format!r}: choose from {', '.join(TOOL_FORMATS)}")
        self.name = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key or "EMPTY"
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.backoff_s = backoff_s
        self.tool_format = tool_format
        self.stream = stream
        self.transport = transport
        self.on_retry = on_retry
        self.protocol = "native" if tool_format in ("auto", "native") else tool_format
        self.token_param = "max_tokens"
        self.reasoning_key: str | None = None  # the field this server returns reasoning in
        self.native_seen = False  # the server has returned tool_calls itself
        self._notes: list[str] = []

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> AssistantTurn:
        problem: server_errors.ServerProblem | None = None
        for _ in range(4):  # each adaptation changes the request once
            body = self.request_body(messages, tools, max_tokens)
            try:
                data = self._send(body)
            except _Rejected as rejected:
                problem = rejected.problem
                if self._adapt(problem, tools):
                    continue
                raise _model_error(problem) from None
            return self._read(data, tools)
        raise _model_error(problem) if problem else ModelError("the request kept being rejected")

    def request_body(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int
    ) -> dict[str, Any]:
        """The chat-completions body for ``messages`` as this server is spoken to now."""
        wire_messages = [self._outgoing(m) for m in messages]
        body: dict[str, Any] = {"model": self.name}
        if tools and self.protocol != "native":
            wire_messages = tool_text.to_text_messages(wire_messages, tools, self.protocol)
        elif tools:  # hosted APIs reject an empty tool list
            body["tools"] = tools
        body["messages"] = wire_messages
        body[self.token_param] = max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _outgoing(self, message: dict[str, Any]) -> dict[str, Any]:
        if "reasoning_content" not in message:
            return message
        out = {k: v for k, v in message.items() if k != "reasoning_content"}
        if self.reasoning_key and self.protocol == "native":
            out[self.reasoning_key] = message["reasoning_content"]
        return out

    def _send(self, body: dict[str, Any]) -> dict[str, Any]:
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                return wire.post_chat(
                    self.base_url, self.api_key, body, self.timeout_s, self.transport
                )
            except wire.HTTPFailure as failure:
                problem = server_errors.classify(failure.status, failure.body)
                if not problem.transient:
                    raise _Rejected(problem) from None
                last = problem.describe()
            except wire.Unreachable as err:
                last = str(err)
            if attempt < self.max_retries:
                delay = self.backoff_s * (2**attempt)
                if self.on_retry is not None:
                    self.on_retry(
                        f"model endpoint {self.base_url}: {last}; retrying in {delay:g} s "
                        f"(attempt {attempt + 2} of {self.max_retries + 1})"
                    )
                time.sleep(delay)
        raise ModelError(f"gave up after {self.max_retries + 1} attempts: {last}")

    def _adapt(self, problem: server_errors.ServerProblem, tools: list[dict[str, Any]]) -> bool:
        """Change the request for a problem the server documents; False when nothing helps."""
        if problem.kind == "max_tokens_unsupported" and self.token_param == "max_tokens":
            self.token_param = "max_completion_tokens"
            self._note("the model takes max_completion_tokens, not max_tokens (switched)")
            return True
        if problem.kind == "temperature_unsupported" and self.temperature is not None:
            self.temperature = None
            self._note("the model takes no temperature (left out from now on)")
            return True
        if (
            problem.kind == "tools_unsupported"
            and self.tool_format == "auto"
            and self.protocol == "native"
            and tools
        ):
            self.protocol = "hermes"
            self._note(
                f"the server rejected native tool calls ({problem.message[:160]}); tool calls "
                f"go as hermes text from now on; fix: {problem.fix}"
            )
            return True
        return False

    def _read(self, data: dict[str, Any], tools: list[dict[str, Any]]) -> AssistantTurn:
        turn = parse_completion(data)
        message = data["choices"][0]["message"]
        if self.reasoning_key is None:
            self.reasoning_key = next((k for k in REASONING_KEYS if message.get(k)), None)
        text = turn.content or ""
        raw = turn.content
        if "</think>" in text or text.lstrip().startswith("<think>"):
            reasoning, turn.content = tool_text.split_reasoning(text)
            turn.reasoning = turn.reasoning or reasoning
        self.native_seen = self.native_seen or bool(turn.tool_calls)
        if tools and not turn.tool_calls and turn.content:
            self._text_calls(turn, {t["function"]["name"] for t in tools if "function" in t})
        if turn.content != raw:
            turn.raw_content = raw
        turn.tool_format = self.protocol
        turn.notes, self._notes = self._notes, []
        return turn

    def _text_calls(self, turn: AssistantTurn, names: set[str]) -> None:
        """Calls written in the reply's text, in the protocol in use (or, for ``auto``, the
        first one found: hermes blocks, else a JSON reply naming our tools). ``auto`` goes on
        in that form, unless the server has returned native calls before (its parser works;
        this reply slipped past it)."""
        if self.tool_format == "native":
            return
        formats = [self.protocol] if self.tool_format != "auto" else list(tool_text.FORMATS)
        if self.tool_format == "auto" and self.protocol in tool_text.FORMATS:
            formats.sort(key=lambda f: f != self.protocol)
        for fmt in formats:
            strict = names if self.tool_format == "auto" else None
            content, calls = tool_text.parse_calls(turn.content or "", fmt, strict)
            if not calls:
                continue
            turn.content, turn.tool_calls = content, calls
            if turn.finish_reason == "stop":
                turn.finish_reason = "tool_calls"
            if self.protocol != fmt and self.native_seen:
                self._note(f"a reply carried its tool calls as text ({fmt} form); read them")
            elif self.protocol != fmt:
                was, self.protocol = self.protocol, fmt
                fix = server_errors.GENERIC_TOOLS_FIX if was == "native" else ""
                self._note(
                    f"the server returned tool calls as text ({fmt} form); answering in that "
                    "form from now on" + (f"; fix: {fix}" if fix else "")
                )
            return

    def _note(self, text: str) -> None:
        log.warning("%s: %s", self.name, text)
        self._notes.append(text)


class _Rejected(Exception):
    def __init__(self, problem: server_errors.ServerProblem) -> None:
        super().__init__(problem.describe())
        self.problem = problem


def _model_error(problem: server_errors.ServerProblem) -> ModelError:
    if problem.kind == "context_overflow":
        return ContextOverflow(problem.describe(), problem.limit, problem.requested, problem.prompt)
    return ModelError(problem.describe())


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
        reasoning=turn.get("reasoning_content"),
    )
