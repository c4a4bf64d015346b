"""A real local HTTP server that answers like one provider (a ``Provider`` fixture).

``ProviderServer(provider)`` serves ``GET /v1/models`` (the provider's model list, or 404)
and ``POST /v1/chat/completions``: the fixture's ``respond(body, index)`` gives a status and a
JSON object (a completion, or the provider's error body). When the request asks for a stream
(``"stream": true``) and the status is 200, the completion is sent as server-sent events in
the provider's streaming style (``stream_style``): ``fragments`` (OpenAI, vLLM, SGLang,
llama.cpp, DeepSeek, Anthropic: the id and name of a call first, its arguments in pieces;
content and reasoning in pieces), or ``whole`` (Ollama: each call in one chunk); usage in a
last chunk with no choices when ``stream_options.include_usage`` is set; then ``[DONE]``.
Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from cuda_agent.agent.local_endpoint import LocalEndpoint

Respond = Callable[[dict[str, Any], int], tuple[int, dict[str, Any]]]


@dataclass
class Provider:
    name: str
    source: str  # the documentation the fixture is written from
    respond: Respond
    models: dict[str, Any] | None = None
    stream_style: str = "fragments"
    notes: dict[str, Any] = field(default_factory=dict)  # what the tests expect of it


class ProviderServer(LocalEndpoint):
    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models") and provider.models is not None:
                    self._json(200, provider.models)
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                with server._lock:
                    index = len(server.requests)
                    server.requests.append(body)
                status, reply = provider.respond(body, index)
                if status == 200 and body.get("stream"):
                    self._stream(body, reply)
                else:
                    self._json(status, reply)

            def _json(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self, body: dict[str, Any], completion: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                usage = (body.get("stream_options") or {}).get("include_usage", False)
                for chunk in stream_chunks(completion, provider.stream_style, usage):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)


def stream_chunks(
    completion: dict[str, Any], style: str, include_usage: bool
) -> Iterator[dict[str, Any]]:
    """A completion as the chunks a server streams it in (see the module docstring)."""
    choice = completion["choices"][0]
    message = choice["message"]
    head = {k: completion.get(k) for k in ("id", "created", "model")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for key in ("reasoning_content", "reasoning", "content", "refusal"):
        text = message.get(key)
        if isinstance(text, str) and text:
            for piece in _pieces(text):
                yield chunk({key: piece})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call["function"]
        if style == "whole":
            yield chunk({"tool_calls": [{"index": index, **call}]})
            continue
        opening = {"name": function["name"], "arguments": ""}
        yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                     "function": opening}]})  # fmt: skip
        for piece in _pieces(function["arguments"]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, choice.get("finish_reason") or "stop")
    if include_usage and completion.get("usage"):
        yield {**head, "choices": [], "usage": completion["usage"]}


def _pieces(text: str, count: int = 3) -> list[str]:
    step = max(1, len(text) // count)
    return [text[i : i + step] for i in range(0, len(text), step)]


def completion(
    message: dict[str, Any],
    finish: str = "stop",
    prompt_tokens: int = 120,
    completion_tokens: int = 30,
    model: str = "model",
    usage_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A chat completion in OpenAI's shape (which every provider here follows)."""
    return {
        "id": f"chatcmpl-{int(time.time() * 1000)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **(usage_extra or {}),
        },
    }
