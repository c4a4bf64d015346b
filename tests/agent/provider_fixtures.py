"""Provider behaviours as fixtures, written from each provider's public API documentation.

Each function returns a ``Provider`` (served by ``provider_server.ProviderServer``) whose
replies and errors follow the documentation cited in its docstring: reply shapes, tool-call
ids, where reasoning goes, the error bodies and messages. The agentic ones play a two-turn
episode: a call of ``read_file`` on ``notes.txt``, then, once a tool result is in the
conversation, a final answer. ``notes`` holds what the tests expect: the tool-call form the
client must end up in, the reasoning it must keep, the text its adaptation note must carry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.agent.provider_server import Provider, completion

READ = {"name": "read_file", "arguments": {"path": "notes.txt"}}
FINAL = "Done: the notes say hello."
HERMES_CALL = f"<tool_call>\n{json.dumps(READ)}\n</tool_call>"


def saw_tool_result(body: dict[str, Any]) -> bool:
    """A tool result in the conversation, native (``tool``) or in a text protocol."""
    for message in body.get("messages", []):
        text = str(message.get("content") or "")
        if message.get("role") == "tool":
            return True
        if message.get("role") == "user" and ("<tool_response>" in text or "Result of" in text):
            return True
    return False


def tool_prompt_in_system(body: dict[str, Any]) -> bool:
    """The system message describes tools (the client's text-protocol prompt)."""
    messages = body.get("messages", [])
    return bool(messages) and "# Tools" in str(messages[0].get("content") or "")


def native_call(call_id: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": READ["name"], "arguments": json.dumps(READ["arguments"])},
    }


def agentic(call: dict[str, Any], finish: str = "tool_calls", **usage: Any) -> Callable[..., Any]:
    """Reply ``call`` (a message) until a tool result is in the conversation, then FINAL."""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if saw_tool_result(body):
            return 200, completion({"content": FINAL}, "stop", model=body["model"])
        return 200, completion(call, finish, model=body["model"], **usage)

    return respond


def model_list(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"object": "list", "data": list(entries)}


# --- OpenAI ----------------------------------------------------------------------------


def openai_reasoning() -> Provider:
    """OpenAI, a reasoning model (o-series, gpt-5).

    https://platform.openai.com/docs/api-reference/chat/create: ``max_tokens`` "is not
    compatible with o-series models", ``max_completion_tokens`` bounds visible and reasoning
    tokens; https://platform.openai.com/docs/guides/reasoning: reasoning is not returned, its
    count is ``usage.completion_tokens_details.reasoning_tokens``. The 400 bodies are the
    API's error objects (``invalid_request_error`` with ``param`` and ``code``
    ``unsupported_parameter`` / ``unsupported_value``). Tool calls: ``tool_calls`` with
    ``call_`` ids, ``content`` null, finish ``tool_calls``.
    """
    call = {"content": None, "refusal": None, "tool_calls": [native_call("call_Qy2RwN7v")]}
    play = agentic(call, usage_extra={"completion_tokens_details": {"reasoning_tokens": 64}})

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if "max_tokens" in body:
            return 400, _openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        if body.get("temperature") not in (None, 1):
            return 400, _openai_error(
                f"Unsupported value: 'temperature' does not support {body['temperature']} with "
                "this model. Only the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
        return play(body, index)

    models = model_list({"id": "o4-mini", "object": "model", "created": 0, "owned_by": "system"})
    return Provider(
        "openai-reasoning",
        "platform.openai.com/docs/guides/reasoning",
        respond,
        models,
        notes={"format": "native", "note": "max_completion_tokens"},
    )


def openai_refusal() -> Provider:
    """OpenAI, a refusal: ``message.refusal`` holds the refusal text and ``content`` is null
    (https://platform.openai.com/docs/guides/structured-outputs#refusals; the chat completion
    object's ``choices[].message.refusal``)."""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        message = {"content": None, "refusal": "I'm sorry, I cannot help with that request."}
        return 200, completion(message, "stop", model=body["model"])

    return Provider("openai-refusal", "platform.openai.com/docs/guides/structured-outputs", respond)


def _openai_error(message: str, param: str | None, code: str) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }


# --- vLLM ------------------------------------------------------------------------------

VLLM_MODELS = model_list(
    {
        "id": "Qwen/Qwen3-8B",
        "object": "model",
        "created": 0,
        "owned_by": "vllm",
        "root": "Qwen/Qwen3-8B",
        "parent": None,
        "max_model_len": 32768,
    }
)


def vllm_tool_parser() -> Provider:
    """vLLM started with ``--enable-auto-tool-choice --tool-call-parser hermes
    --reasoning-parser qwen3``.

    https://docs.vllm.ai/en/latest/features/tool_calling/: native ``tool_calls`` (ids
    ``chatcmpl-tool-...``); https://docs.vllm.ai/en/stable/features/reasoning_outputs/: the
    reasoning in ``reasoning`` ("reasoning used to be called reasoning_content"); ``GET
    /v1/models`` lists ``max_model_len``. Streams in OpenAI's fragments.
    """
    call = {
        "content": None,
        "reasoning": "The task is in notes.txt; read it first.",
        "tool_calls": [native_call("chatcmpl-tool-6f0c3a")],
    }
    return Provider(
        "vllm-parser",
        "docs.vllm.ai/en/latest/features/tool_calling/",
        agentic(call),
        VLLM_MODELS,
        notes={"format": "native", "reasoning": "read it first"},
    )


VLLM_NO_PARSER = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)


def vllm_no_tool_parser() -> Provider:
    """vLLM started without a tool-call parser.

    https://docs.vllm.ai/en/latest/features/tool_calling/: ``tool_choice="auto"`` (the default
    when ``tools`` are given) needs ``--enable-auto-tool-choice`` and ``--tool-call-parser``;
    without them the request is refused with HTTP 400 and that message (vLLM's error body:
    ``{"error": {"message", "type": "BadRequestError", "param", "code": 400}}``). Without
    ``tools`` a Qwen model writes its calls as Hermes text in ``content`` when the system
    prompt describes them.
    """

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if body.get("tools") and body.get("tool_choice") != "none":
            error = {"message": VLLM_NO_PARSER, "type": "BadRequestError", "param": None}
            return 400, {"error": {**error, "code": 400}}
        if saw_tool_result(body):
            return 200, completion({"content": FINAL}, model=body["model"])
        text = HERMES_CALL if tool_prompt_in_system(body) else "I would read notes.txt."
        return 200, completion({"content": text}, "stop", model=body["model"])

    return Provider(
        "vllm-no-parser",
        "docs.vllm.ai/en/latest/features/tool_calling/",
        respond,
        VLLM_MODELS,
        notes={"format": "hermes", "note": "--enable-auto-tool-choice"},
    )


def vllm_context(limit: int, max_prompt_seen: list[int] | None = None) -> Provider:
    """vLLM's context-length check (vLLM 0.6's wording, top-level error object): "This
    model's maximum context length is N tokens. However, you requested M tokens (P in the
    messages, C in the completion). Please reduce the length of the messages or completion."
    The prompt is counted here as a quarter of the characters of the messages."""

    play = agentic({"content": None, "tool_calls": [_big_call()]})

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        prompt = len(json.dumps(body["messages"])) // 4
        completion_tokens = int(body.get("max_tokens") or 0)
        if max_prompt_seen is not None:
            max_prompt_seen.append(prompt)
        if prompt + completion_tokens > limit:
            message = (
                f"This model's maximum context length is {limit} tokens. However, you "
                f"requested {prompt + completion_tokens} tokens ({prompt} in the messages, "
                f"{completion_tokens} in the completion). Please reduce the length of the "
                "messages or completion."
            )
            error = {"object": "error", "message": message, "type": "BadRequestError"}
            return 400, {**error, "param": None, "code": 400}
        return play(body, index)

    return Provider("vllm-context", "docs.vllm.ai (serving errors)", respond, VLLM_MODELS)


def _big_call() -> dict[str, Any]:
    return {
        "id": "chatcmpl-tool-big",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": "big.txt"})},
    }


# --- SGLang ----------------------------------------------------------------------------

SGLANG_MODELS = model_list(
    {
        "id": "Qwen/Qwen2.5-7B-Instruct",
        "object": "model",
        "created": 0,
        "owned_by": "sglang",
        "root": "Qwen/Qwen2.5-7B-Instruct",
        "max_model_len": 32768,
    }
)


def sglang_no_tool_parser() -> Provider:
    """SGLang started without ``--tool-call-parser``
    (https://docs.sglang.io/advanced_features/tool_parser.html): ``tools`` are accepted and
    rendered by the chat template, but nothing parses the reply, so a Qwen model's calls come
    back as Hermes text in ``content`` with finish ``stop``. (This is the issue's case:
    ``solve`` took that text for a final answer.)"""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if saw_tool_result(body):
            return 200, completion({"content": FINAL}, model=body["model"])
        return 200, completion({"content": HERMES_CALL}, "stop", model=body["model"])

    return Provider(
        "sglang-no-parser",
        "docs.sglang.io/advanced_features/tool_parser.html",
        respond,
        SGLANG_MODELS,
        notes={"format": "hermes", "note": "returned tool calls as text"},
    )


def sglang_parsers() -> Provider:
    """SGLang with ``--tool-call-parser qwen25 --reasoning-parser qwen3``: native
    ``tool_calls`` and the reasoning in ``reasoning_content``
    (https://docs.sglang.io/advanced_features/separate_reasoning.html)."""
    call = {
        "content": None,
        "reasoning_content": "Start with notes.txt.",
        "tool_calls": [native_call("call_5b1c9e2f")],
    }
    return Provider(
        "sglang-parsers",
        "docs.sglang.io/advanced_features/separate_reasoning.html",
        agentic(call),
        SGLANG_MODELS,
        notes={"format": "native", "reasoning": "Start with notes.txt"},
    )


# --- Ollama ----------------------------------------------------------------------------

OLLAMA_MODELS = model_list(
    {"id": "qwen3:8b", "object": "model", "created": 1750000000, "owned_by": "library"}
)


def ollama() -> Provider:
    """Ollama's OpenAI compatibility (https://docs.ollama.com/api/openai-compatibility):
    tools and thinking models supported; calls come with ``index`` and ``call_`` ids, a whole
    call in one stream chunk; a thinking model's reasoning in ``reasoning``; ``/v1/models``
    without a context length (Ollama's context is ``num_ctx``, not reported there)."""
    call = {
        "content": "",
        "reasoning": "I need the notes.",
        "tool_calls": [{**native_call("call_x7k2m9qz"), "index": 0}],
    }
    return Provider(
        "ollama",
        "docs.ollama.com/api/openai-compatibility",
        agentic(call),
        OLLAMA_MODELS,
        stream_style="whole",
        notes={"format": "native", "reasoning": "I need the notes"},
    )


def ollama_model_without_tools() -> Provider:
    """Ollama with a model whose template has no tools: HTTP 400 "<model> does not support
    tools" (https://docs.ollama.com/api/openai-compatibility; Ollama's error object). Told
    about the tools in its system prompt, such a model answers with a JSON call, here in
    Llama 3.1's form (``parameters``)."""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if body.get("tools"):
            message = f"registry.ollama.ai/library/{body['model']} does not support tools"
            return 400, {"error": {"message": message, "type": "api_error", "param": None}}
        if saw_tool_result(body):
            return 200, completion({"content": FINAL}, model=body["model"])
        call = json.dumps({"name": READ["name"], "parameters": READ["arguments"]})
        text = call if tool_prompt_in_system(body) else "Hello!"
        return 200, completion({"content": text}, "stop", model=body["model"])

    return Provider(
        "ollama-no-tools",
        "docs.ollama.com/api/openai-compatibility",
        respond,
        model_list({"id": "gemma3:4b", "object": "model", "created": 0, "owned_by": "library"}),
        stream_style="whole",
        notes={"format": "json", "note": "does not support tools"},
    )


# --- llama.cpp -------------------------------------------------------------------------

LLAMA_CPP_MODELS = model_list(
    {
        "id": "qwen2.5-7b-instruct-q4_k_m.gguf",
        "object": "model",
        "created": 0,
        "owned_by": "llamacpp",
        "meta": {"vocab_type": 2, "n_vocab": 152064, "n_ctx_train": 32768, "n_embd": 3584},
    }
)
LLAMA_CPP_README = "github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md"


def llamacpp_jinja() -> Provider:
    """llama-server with ``--jinja --reasoning-format deepseek``
    (https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md,
    docs/function-calling.md): native ``tool_calls``, thoughts in
    ``message.reasoning_content``; ``/v1/models`` gives ``meta.n_ctx_train``."""
    call = {
        "content": "",
        "reasoning_content": "Reading the notes is the first step.",
        "tool_calls": [native_call("kq0XrZpTzE1pQvG7")],
    }
    return Provider(
        "llamacpp-jinja",
        LLAMA_CPP_README,
        agentic(call),
        LLAMA_CPP_MODELS,
        notes={"format": "native", "reasoning": "first step"},
    )


def llamacpp_no_jinja() -> Provider:
    """llama-server without ``--jinja`` (older builds' default, or ``--no-jinja``):
    ``tools`` are refused with HTTP 500 ``{"error": {"code": 500, "message": "tools param
    requires --jinja flag", "type": "server_error"}}``; with ``--reasoning-format none``
    thoughts stay in ``content`` as ``<think>...</think>`` (README, ``--reasoning-format``)."""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if body.get("tools"):
            error = {"code": 500, "message": "tools param requires --jinja flag"}
            return 500, {"error": {**error, "type": "server_error"}}
        if saw_tool_result(body):
            return 200, completion({"content": FINAL}, model=body["model"])
        text = f"<think>\nThe task must be in the notes.\n</think>\n\n{HERMES_CALL}"
        return 200, completion({"content": text}, "stop", model=body["model"])

    return Provider(
        "llamacpp-no-jinja",
        LLAMA_CPP_README,
        respond,
        LLAMA_CPP_MODELS,
        notes={"format": "hermes", "reasoning": "must be in the notes", "note": "--jinja"},
    )


# --- Anthropic -------------------------------------------------------------------------


def anthropic() -> Provider:
    """Anthropic's OpenAI SDK compatibility (https://platform.claude.com/docs/en/api/openai-sdk):
    ``max_tokens`` and ``max_completion_tokens`` both supported, ``tool_calls`` with
    ``toolu_`` ids and text beside them, finish ``tool_calls``; extended thinking is not
    returned through this layer."""
    call = {"content": "I'll read the notes first.", "tool_calls": [native_call("toolu_01A09q")]}
    return Provider(
        "anthropic",
        "platform.claude.com/docs/en/api/openai-sdk",
        agentic(call),
        {"data": [{"type": "model", "id": "claude-sonnet-4-5", "display_name": "Claude"}]},
        notes={"format": "native"},
    )


# --- DeepSeek --------------------------------------------------------------------------


def deepseek() -> Provider:
    """DeepSeek in thinking mode (https://api-docs.deepseek.com/guides/thinking_mode):
    ``reasoning_content`` beside ``content`` and ``tool_calls``; "for turns that do perform
    tool calls, the reasoning_content must be fully passed back to the API in all subsequent
    requests", else HTTP 400."""
    call = {
        "content": "",
        "reasoning_content": "The user wants the notes; call read_file.",
        "tool_calls": [native_call("call_00_jJ6Qv")],
    }
    play = agentic(call)

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        for position, message in enumerate(body["messages"]):
            if message.get("tool_calls") and "reasoning_content" not in message:
                text = (
                    "Missing `reasoning_content` field in the assistant message at message "
                    f"index {position}"
                )
                return 400, _openai_error(text, None, "invalid_request_error")
        return play(body, index)

    models = model_list({"id": "deepseek-reasoner", "object": "model", "owned_by": "deepseek"})
    return Provider(
        "deepseek",
        "api-docs.deepseek.com/guides/thinking_mode",
        respond,
        models,
        notes={"format": "native", "reasoning": "call read_file"},
    )


AGENTIC: dict[str, Callable[[], Provider]] = {
    "openai-reasoning": openai_reasoning,
    "vllm-parser": vllm_tool_parser,
    "vllm-no-parser": vllm_no_tool_parser,
    "sglang-no-parser": sglang_no_tool_parser,
    "sglang-parsers": sglang_parsers,
    "ollama": ollama,
    "ollama-no-tools": ollama_model_without_tools,
    "llamacpp-jinja": llamacpp_jinja,
    "llamacpp-no-jinja": llamacpp_no_jinja,
    "anthropic": anthropic,
    "deepseek": deepseek,
}

# The context-length errors as each provider documents them: (status, body, limit, requested).
CONTEXT_ERRORS: dict[str, tuple[int, Any, int | None, int | None]] = {
    # https://platform.openai.com/docs/guides/error-codes (code context_length_exceeded)
    "openai": (
        400,
        _openai_error(
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130412 tokens. Please reduce the length of the messages.",
            "messages",
            "context_length_exceeded",
        ),
        128000,
        None,
    ),
    # vLLM >= 0.9: the prompt alone is over the window
    "vllm": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 32768 tokens. However, "
                "your request has 33500 input tokens. Please reduce the length of the input "
                "messages.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        },
        32768,
        None,
    ),
    # SGLang (serving_chat's validation)
    "sglang": (
        400,
        {
            "object": "error",
            "message": "Requested token count exceeds the model's maximum context length of "
            "32768 tokens. You requested a total of 34000 tokens: 30000 tokens from the input "
            "messages and 4000 tokens for the completion. Please reduce the number of tokens in "
            "the input messages or the completion to fit within the limit.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        32768,
        34000,
    ),
    # llama.cpp's server: exceed_context_size_error with n_prompt_tokens and n_ctx
    "llama.cpp": (
        400,
        {
            "error": {
                "code": 400,
                "message": "request (9412 tokens) exceeds the available context size "
                "(8192 tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9412,
                "n_ctx": 8192,
            }
        },
        8192,
        9412,
    ),
    # Anthropic (https://platform.claude.com/docs/en/api/errors, invalid_request_error)
    "anthropic": (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 213462 tokens > 200000 maximum",
            },
        },
        200000,
        213462,
    ),
    # DeepSeek (https://api-docs.deepseek.com/quick_start/error_codes: 400 invalid format)
    "deepseek": (
        400,
        _openai_error(
            "This model's maximum context length is 65536 tokens. However, you requested "
            "70000 tokens (60000 in the messages, 10000 in the completion). Please reduce the "
            "length of the messages or completion.",
            None,
            "invalid_request_error",
        ),
        65536,
        70000,
    ),
}
