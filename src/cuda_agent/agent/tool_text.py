"""Tool calls written as text, for servers and models that do not return ``tool_calls``.

Two text protocols:

* ``hermes``: the Hermes / Qwen2.5 form, what Qwen-family models write when the server has
  no tool-call parser (vLLM and SGLang without one, llama.cpp without ``--jinja``)::

      <tool_call>
      {"name": "read_file", "arguments": {"path": "SKILL.md"}}
      </tool_call>

  Qwen3-Coder's XML body (``<function=NAME><parameter=KEY>VALUE</parameter></function>``)
  inside the same tags is read too. Results go back as ``<tool_response>`` blocks in a user
  turn, as Qwen's chat template writes them.
* ``json``: the whole reply is one JSON object ``{"name": ..., "arguments": {...}}`` (or a
  list of them; ``parameters`` is read as ``arguments``, as Llama 3.1 writes it), optionally
  in a fenced block; results go back as user turns naming the call.

``tools_prompt`` writes the tool schemas and the protocol's instructions (appended to the
system message; ``tools_prompt_frame`` gives the text around the schemas, for chat templates
that render the same prompt); ``parse_calls`` finds the calls in a reply and returns the rest as the
visible content; ``to_text_messages`` rewrites a conversation kept in the native form
(assistant ``tool_calls``, ``tool`` messages) into the protocol, so the trajectory keeps one
form whatever the server speaks; ``split_reasoning`` takes ``<think>...</think>`` out of a
reply (servers without a reasoning parser leave it in ``content``).

What it does not do: guess calls from free prose, or run anything.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from cuda_agent.agent.chat_types import ToolCall

FORMATS = ("hermes", "json")

_HERMES_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)>")
_XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\s*(.*?)\s*</parameter>", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]+)"')
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)

_INSTRUCTIONS = {
    "hermes": (
        "# Tools\n\nYou may call one or more functions. Their signatures, in JSON schema, are "
        "within <tools></tools> XML tags:\n<tools>\n{schemas}\n</tools>\n\nFor each function "
        "call, write a JSON object with the function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>\n'
        "The results come back in <tool_response></tool_response> tags. A reply without a "
        "tool call ends your work."
    ),
    "json": (
        "# Tools\n\nYou may call these functions (JSON schema):\n{schemas}\n\nTo call one, "
        'reply with only a JSON object: {{"name": <function-name>, "arguments": '
        "<args-json-object>}} (or a JSON list of such objects), nothing else. The results "
        "come back in the next message. A reply that is not a function call ends your work."
    ),
}


def tools_prompt(tools: list[dict[str, Any]], fmt: str) -> str:
    """The tool schemas and how to call them in ``fmt``, for the system message."""
    schemas = "\n".join(json.dumps(tool.get("function", tool)) for tool in tools)
    return _INSTRUCTIONS[fmt].format(schemas=schemas)


def tools_prompt_frame(fmt: str) -> tuple[str, str]:
    """The text of ``tools_prompt(tools, fmt)`` before and after the schemas (one JSON object
    per tool, joined by newlines)."""
    head, _, tail = _INSTRUCTIONS[fmt].partition("{schemas}")
    return head.format(), tail.format()


def parse_calls(text: str, fmt: str, names: set[str] | None = None) -> tuple[str, list[ToolCall]]:
    """The calls written in ``text`` (``fmt``) and the text without them.

    ``names``: for ``json``, count a JSON reply as calls only when every object names one of
    these tools (None: any object with a ``name``); hermes blocks are calls whatever they
    name (a wrong name is the model's error, reported back to it by the registry).
    """
    if fmt == "hermes":
        return _parse_hermes(text)
    if fmt == "json":
        return _parse_json(text, names)
    raise ValueError(f"unknown text tool format {fmt!r} (choose from {', '.join(FORMATS)})")


def _parse_hermes(text: str) -> tuple[str, list[ToolCall]]:
    calls = [_hermes_call(m.group(1)) for m in _HERMES_BLOCK.finditer(text)]
    if not calls:
        return text, []
    return _HERMES_BLOCK.sub("", text).strip(), calls


def _hermes_call(inner: str) -> ToolCall:
    body = inner.strip()
    function = _XML_FUNCTION.search(body)
    if body.startswith("<function=") and function:
        arguments = {k: _xml_value(v) for k, v in _XML_PARAMETER.findall(body)}
        return _call(function.group(1), json.dumps(arguments))
    try:
        data = json.loads(body)
    except ValueError:
        name = _NAME.search(body)
        return _call(name.group(1) if name else "", body)  # the registry reports the JSON error
    if not isinstance(data, dict):
        return _call("", body)
    return _call(str(data.get("name") or ""), _arguments(data))


def _xml_value(raw: str) -> Any:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, (int, float, bool)) else raw


def _parse_json(text: str, names: set[str] | None) -> tuple[str, list[ToolCall]]:
    body = text.strip()
    fence = _FENCE.match(body)
    if fence:
        body = fence.group(1).strip()
    if not body.startswith(("{", "[")):
        return text, []
    try:
        data = json.loads(body)
    except ValueError:
        return text, []
    items = data if isinstance(data, list) else [data]
    if not items or not all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        return text, []
    if names is not None and not all(i["name"] in names for i in items):
        return text, []
    return "", [_call(i["name"], _arguments(i)) for i in items]


def _arguments(data: dict[str, Any]) -> str:
    arguments = data.get("arguments", data.get("parameters", {}))
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _call(name: str, arguments: str) -> ToolCall:
    return ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=arguments)


def render_calls(calls: list[dict[str, Any]], fmt: str) -> str:
    """Native ``tool_calls`` entries written in ``fmt``."""
    objects = [
        {"name": c["function"]["name"], "arguments": _loads(c["function"]["arguments"])}
        for c in calls
    ]
    if fmt == "hermes":
        return "\n".join(f"<tool_call>\n{json.dumps(o)}\n</tool_call>" for o in objects)
    return json.dumps(objects[0] if len(objects) == 1 else objects)


def _loads(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def to_text_messages(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], fmt: str
) -> list[dict[str, Any]]:
    """``messages`` (native form) as the text protocol ``fmt`` writes them: the tool prompt
    appended to the system message, calls as text, results as user turns (in ``hermes``,
    consecutive results share one turn)."""
    names: dict[str, str] = {}
    prompt = tools_prompt(tools, fmt)
    out: list[dict[str, Any]] = []
    if not messages or messages[0].get("role") != "system":
        out.append({"role": "system", "content": prompt})
    last_was_result = False
    for message in messages:
        role = message.get("role")
        content = message.get("content") or ""
        if role == "tool":
            text = _result_text(message, names, fmt)
            if fmt == "hermes" and last_was_result:
                out[-1] = {"role": "user", "content": f"{out[-1]['content']}\n{text}"}
            else:
                out.append({"role": "user", "content": text})
            last_was_result = True
            continue
        last_was_result = False
        if role == "system" and not out:
            out.append({"role": "system", "content": f"{content}\n\n{prompt}"})
        elif role == "assistant" and message.get("tool_calls"):
            calls = message["tool_calls"]
            names.update({c["id"]: c["function"]["name"] for c in calls})
            text = render_calls(calls, fmt)
            out.append({"role": "assistant", "content": f"{content}\n{text}" if content else text})
        else:
            out.append({"role": role, "content": content})
    return out


def _result_text(message: dict[str, Any], names: dict[str, str], fmt: str) -> str:
    content = str(message.get("content") or "")
    if fmt == "hermes":
        return f"<tool_response>\n{content}\n</tool_response>"
    return f"Result of {names.get(str(message.get('tool_call_id')), 'the tool')}:\n{content}"


def split_reasoning(text: str) -> tuple[str | None, str]:
    """``<think>...</think>`` taken out of ``text``: ``(reasoning, the rest)``. DeepSeek-R1
    writes no opening tag; a reply cut off inside the block is all reasoning."""
    if "</think>" in text:
        head, _, rest = text.partition("</think>")
        return head.replace("<think>", "", 1).strip() or None, rest.strip()
    if text.lstrip().startswith("<think>"):
        return text.lstrip()[len("<think>") :].strip() or None, ""
    return None, text
