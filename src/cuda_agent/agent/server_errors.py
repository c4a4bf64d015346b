"""What an OpenAI-compatible server's error means, read from the messages providers document.

``classify(status, body)`` names the problem behind an HTTP error: the context window
exceeded (with the token counts the message gives), tool calls not enabled on the server,
``max_tokens`` or ``temperature`` refused by the model (OpenAI's reasoning models), an unknown
model, a refused key; anything else is ``other``. Each problem carries the fix a user can
apply. The patterns are those of the providers' own messages:

* OpenAI (https://platform.openai.com/docs/guides/reasoning, API reference
  https://platform.openai.com/docs/api-reference/chat/create): ``unsupported_parameter`` on
  ``max_tokens`` ("Use 'max_completion_tokens' instead"), ``unsupported_value`` on
  ``temperature``, ``context_length_exceeded`` ("This model's maximum context length is N
  tokens. However, your messages resulted in M tokens").
* vLLM (https://docs.vllm.ai/en/latest/features/tool_calling/): '"auto" tool choice requires
  --enable-auto-tool-choice and --tool-call-parser to be set'; its context errors ("maximum
  context length is N tokens ... your request has M input tokens"); a 404 "The model `x` does
  not exist".
* SGLang: "Requested token count exceeds the model's maximum context length of N tokens. You
  requested a total of M tokens: P tokens from the input messages and C tokens for the
  completion".
* llama.cpp's server (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md):
  "tools param requires --jinja flag" (HTTP 500), ``exceed_context_size_error`` with
  ``n_prompt_tokens`` and ``n_ctx``.
* Ollama (https://docs.ollama.com/api/openai-compatibility): "<model> does not support tools",
  404 "model 'x' not found".
* Anthropic's OpenAI SDK compatibility (https://platform.claude.com/docs/en/api/openai-sdk):
  "prompt is too long: M tokens > N maximum".
* DeepSeek (https://api-docs.deepseek.com/guides/thinking_mode): OpenAI's context message.
* ``transformers serve``: a server pinned to one model answers "Server is pinned to ...".

What it does not do: make requests, retry, or decide what to do (the client and the loop do).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

KINDS = (
    "context_overflow",
    "tools_unsupported",
    "max_tokens_unsupported",
    "temperature_unsupported",
    "unknown_model",
    "auth",
    "other",
)
TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

VLLM_TOOLS_FIX = (
    "start vLLM with --enable-auto-tool-choice --tool-call-parser hermes (the parser of your "
    "model family: hermes for Qwen2.5, qwen3_coder, llama3_json, mistral ...)"
)
SGLANG_TOOLS_FIX = "start SGLang with --tool-call-parser qwen25 (or your model family's parser)"
LLAMA_CPP_TOOLS_FIX = "start llama-server with --jinja (and a chat template that has tools)"
OLLAMA_TOOLS_FIX = "use an Ollama model with tool support (ollama.com/search?c=tools)"
GENERIC_TOOLS_FIX = (
    "enable the server's tool-call parser (vLLM: --enable-auto-tool-choice --tool-call-parser "
    "hermes; SGLang: --tool-call-parser qwen25; llama-server: --jinja), or keep "
    "--tool-format auto (tool calls as text)"
)

_NUMBER = r"(\d[\d,]*)"


@dataclass(frozen=True)
class ServerProblem:
    kind: str
    status: int
    message: str
    fix: str = ""
    limit: int | None = None
    requested: int | None = None
    prompt: int | None = None

    def describe(self) -> str:
        text = f"HTTP {self.status}: {self.message[:300]}"
        return f"{text} (fix: {self.fix})" if self.fix else text

    @property
    def transient(self) -> bool:
        return self.kind == "other" and self.status in TRANSIENT_STATUS


def error_fields(body: Any) -> tuple[str, dict[str, Any]]:
    """The error's message and its other fields, from the shapes servers use: OpenAI's
    ``{"error": {"message": ...}}``, vLLM's top-level ``{"message": ...}``, FastAPI's
    ``{"detail": ...}``, an ``{"error": "text"}`` or plain text."""
    if isinstance(body, (bytes, str)):
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            return text.strip(), {}
    if not isinstance(body, dict):
        return str(body), {}
    error = body.get("error", body)
    if isinstance(error, str):
        return error, body
    if not isinstance(error, dict):
        return json.dumps(body)[:500], body
    message = error.get("message") or error.get("detail") or body.get("detail")
    if message is None:
        message = json.dumps(body)[:500]
    if not isinstance(message, str):
        message = json.dumps(message)
    return message, {**body, **error}


def classify(status: int, body: Any) -> ServerProblem:
    """The problem an HTTP error reports (see the module docstring for the sources)."""
    message, fields = error_fields(body)
    low = message.lower()
    code = str(fields.get("code") or "")
    param = str(fields.get("param") or "")
    if param == "max_tokens" or "use 'max_completion_tokens'" in low:
        return ServerProblem("max_tokens_unsupported", status, message)
    if param == "temperature" and ("unsupported" in code or "does not support" in low):
        return ServerProblem("temperature_unsupported", status, message)
    overflow = _context_overflow(status, message, code, fields)
    if overflow is not None:
        return overflow
    tools_fix = _tools_fix(low)
    if tools_fix:
        return ServerProblem("tools_unsupported", status, message, tools_fix)
    if status in (401, 403):
        return ServerProblem(
            "auth", status, message, "check the API key (the variable named by --api-key-env)"
        )
    if _unknown_model(status, low):
        return ServerProblem(
            "unknown_model", status, message, "pass a model the server serves (GET /models)"
        )
    return ServerProblem("other", status, message)


def _tools_fix(low: str) -> str:
    if "--enable-auto-tool-choice" in low or "tool-call-parser" in low:
        return VLLM_TOOLS_FIX
    if "--jinja" in low:
        return LLAMA_CPP_TOOLS_FIX
    if "does not support tools" in low:
        return OLLAMA_TOOLS_FIX
    if "tool" in low and re.search(r"not supported|unsupported|does not support|requires", low):
        return GENERIC_TOOLS_FIX
    return ""


def _unknown_model(status: int, low: str) -> bool:
    if "pinned to" in low:
        return True
    if "model" not in low:
        return False
    return status == 404 or "does not exist" in low or "not found" in low


def _context_overflow(
    status: int, message: str, code: str, fields: dict[str, Any]
) -> ServerProblem | None:
    low = message.lower()
    limit = _first(
        message,
        rf"maximum context length (?:is|of) {_NUMBER}",
        rf"available context size \({_NUMBER} tokens\)",
        rf"tokens > {_NUMBER} maximum",
        rf"context length \({_NUMBER}",
    )
    prompt = _first(
        message,
        rf"{_NUMBER} tokens from the input messages",
        rf"your request has {_NUMBER} input tokens",
        rf"your messages resulted in {_NUMBER} tokens",
        rf"{_NUMBER}(?: tokens?)? in the messages",
        rf"request \({_NUMBER} tokens\) exceeds",
        rf"prompt is too long: {_NUMBER} tokens",
    )
    # llama.cpp and Anthropic count the prompt alone against the window: it is the request
    requested = _first(
        message,
        rf"requested(?: a total of)? {_NUMBER} tokens",
        rf"request \({_NUMBER} tokens\) exceeds",
        rf"prompt is too long: {_NUMBER} tokens",
    )
    if isinstance(fields.get("n_ctx"), int):
        limit = fields["n_ctx"]
    if isinstance(fields.get("n_prompt_tokens"), int):
        prompt = fields["n_prompt_tokens"]
        requested = requested if requested is not None else prompt
    words = (
        "context length",
        "context window",
        "context size",
        "prompt is too long",
        "maximum context",
    )
    if not (
        code == "context_length_exceeded"
        or "exceed_context_size" in str(fields.get("type") or "")
        or limit is not None
        or any(w in low for w in words)
    ):
        return None
    if status not in (400, 413, 422, 500):
        return None
    return ServerProblem(
        "context_overflow",
        status,
        message,
        "give the agent a smaller budget (--context-tokens) or start the server with a longer "
        "context (vLLM --max-model-len, llama-server -c)",
        limit=limit,
        requested=requested,
        prompt=prompt,
    )


def _first(text: str, *patterns: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return int(match.group(1).replace(",", ""))
    return None
