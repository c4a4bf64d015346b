"""HTTP for OpenAI-compatible chat endpoints: one request, plain or streamed, as dicts.

``post_chat(base_url, api_key, body, timeout_s)`` sends a chat-completions body and returns
the completion as a dict in the non-streamed shape. With ``body["stream"]`` the server-sent
events are read and merged by ``merge_stream``: content, reasoning (``reasoning_content`` or
``reasoning``) and refusal deltas joined, tool-call fragments joined by their ``index`` (the
OpenAI streaming format: the id and name in the first fragment, the arguments spread over
the following ones; some servers send a whole call in one chunk), the finish reason and the
usage of the chunk that carries one. Requests go through the ``openai`` package when it is
installed, else through the standard library (a fixed GPU image), with the same results.
``get_json`` reads a ``GET`` endpoint (``/models``).

Failures: ``HTTPFailure`` (the server answered with an error status; its body is kept for
``server_errors.classify``), ``Unreachable`` (no answer: refused, reset, timed out, or a reply
that is not JSON).

What it does not do: retry, interpret errors, or read the reply's meaning (``models``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator
from typing import Any


class HTTPFailure(Exception):
    """The server answered with an error status."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.body = body


class Unreachable(Exception):
    """No usable answer: connection refused or reset, a timeout, or a body that is not JSON."""


TRANSPORTS = ("auto", "openai", "stdlib")


def post_chat(
    base_url: str, api_key: str, body: dict[str, Any], timeout_s: float, transport: str = "auto"
) -> dict[str, Any]:
    """POST ``body`` to ``{base_url}/chat/completions``; the completion as a dict.
    ``transport``: ``openai`` (the package), ``stdlib``, or ``auto`` (the package if
    installed)."""
    if transport == "auto":
        try:
            import openai  # noqa: F401
        except ImportError:
            transport = "stdlib"
    if transport == "stdlib":
        return _post_stdlib(base_url, api_key, body, timeout_s)
    return _post_openai(base_url, api_key, body, timeout_s)


def get_json(base_url: str, path: str, api_key: str, timeout_s: float) -> Any:
    """``GET {base_url}{path}`` as JSON (standard library; used for ``/models``)."""
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}{path}", headers={"Authorization": f"Bearer {api_key}"}
    )
    return _open_json(request, timeout_s)


def merge_stream(chunks: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Chat-completion chunks (the SSE ``data`` objects) merged into one completion dict."""
    texts: dict[str, list[str]] = {}
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    usage: Any = None
    model = ""
    for chunk in chunks:
        if chunk.get("error"):
            raise HTTPFailure(500, chunk)
        usage = chunk.get("usage") or usage
        model = chunk.get("model") or model
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            for key in ("content", "reasoning_content", "reasoning", "refusal"):
                if isinstance(delta.get(key), str) and delta[key]:
                    texts.setdefault(key, []).append(delta[key])
            for position, fragment in enumerate(delta.get("tool_calls") or []):
                _merge_call(calls, position, fragment)
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": None}
    message.update({key: "".join(parts) for key, parts in texts.items()})
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return {"object": "chat.completion", "model": model, "choices": [choice], "usage": usage}


def _merge_call(calls: dict[int, dict[str, Any]], position: int, fragment: dict[str, Any]) -> None:
    index = fragment.get("index")
    index = position if not isinstance(index, int) else index
    entry = calls.setdefault(
        index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
    )
    if fragment.get("id"):
        entry["id"] = fragment["id"]
    function = fragment.get("function") or {}
    name = function.get("name")
    if name and name != entry["function"]["name"]:
        entry["function"]["name"] += name
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        entry["function"]["arguments"] += arguments
    elif arguments is not None:  # a server that sends the object itself
        entry["function"]["arguments"] += json.dumps(arguments)


def _post_openai(
    base_url: str, api_key: str, body: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s)
    try:
        if body.get("stream"):
            stream = client.chat.completions.create(**body)
            return merge_stream(chunk.model_dump() for chunk in stream)
        return dict(client.chat.completions.create(**body).model_dump())
    except openai.APIStatusError as err:
        raise HTTPFailure(err.status_code, _error_body(err)) from None
    except (openai.APIConnectionError, openai.APITimeoutError) as err:
        raise Unreachable(f"{type(err).__name__}: {err}") from None
    except openai.APIError as err:  # an error event inside a stream, a body that is not JSON
        raise HTTPFailure(500, {"error": {"message": str(err)}}) from None


def _error_body(err: Any) -> Any:
    try:
        return err.response.text
    except Exception:  # a streamed error response that cannot be read again
        return {"error": err.body if err.body is not None else str(err)}


def _post_stdlib(
    base_url: str, api_key: str, body: dict[str, Any], timeout_s: float
) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url.rstrip('/')}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {api_key}"},
    )
    if not body.get("stream"):
        return dict(_open_json(request, timeout_s))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return merge_stream(_sse_objects(response))
    except urllib.error.HTTPError as err:
        raise HTTPFailure(err.code, err.read()) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        raise Unreachable(str(err)) from None


def _open_json(request: urllib.request.Request, timeout_s: float) -> Any:
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read()
    except urllib.error.HTTPError as err:
        raise HTTPFailure(err.code, err.read()) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        raise Unreachable(str(getattr(err, "reason", err))) from None
    try:
        return json.loads(raw)
    except ValueError:
        raise Unreachable(f"the reply is not JSON: {raw[:200]!r}") from None


def _sse_objects(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a ``text/event-stream`` body, up to ``data: [DONE]``."""
    for raw in lines:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            continue  # blank separators, comments (": ping"), event names
        payload = line[len("data:") :].strip()
        if payload == "[DONE]":
            return
        try:
            data = json.loads(payload)
        except ValueError:
            raise Unreachable(f"a stream event that is not JSON: {payload[:200]!r}") from None
        if isinstance(data, dict):
            yield data
