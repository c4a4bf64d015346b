"""``cuda-agent models check``: can this endpoint drive the agent? A few small requests tell.

``check_endpoint(base_url, model, api_key)`` asks, in order:

1. ``GET /models``: is the server there, does it serve ``model``, what context length does
   it report (vLLM and SGLang: ``max_model_len``; llama.cpp: ``meta.n_ctx_train``; others:
   ``context_length`` / ``context_window``), and which server it is (``owned_by``);
2. a one-line chat: does the model answer, with ``max_tokens`` or ``max_completion_tokens``,
   and does reasoning come back apart;
3. one tool, one instruction to call it, through the client in ``auto`` mode: do calls come
   back natively, as text (``hermes`` / ``json``, which ``--tool-format auto`` handles), or
   not at all; for text, the server-side fix (vLLM: ``--enable-auto-tool-choice
   --tool-call-parser hermes``; SGLang: ``--tool-call-parser``; llama.cpp: ``--jinja``);
4. a streamed one-line chat.

The endpoint is usable when the chat works and tool calls come back in some form. Each step's
finding carries the fix for the common misconfigurations. What it does not do: judge how good
the model is at writing kernels, or change anything on the server.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from cuda_agent.agent import server_errors, wire
from cuda_agent.agent.chat_types import AssistantTurn, ModelError
from cuda_agent.agent.loop import AgentLimits
from cuda_agent.agent.models import OpenAIChatModel

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "echo_text",
        "description": "Echo a text back.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to echo."}},
            "required": ["text"],
        },
    },
}
PROBE_MESSAGES = [
    {"role": "system", "content": "You are an assistant that acts through tools."},
    {
        "role": "user",
        "content": 'Call the tool echo_text with text "ready". Reply with the tool call only.',
    },
]
CHAT_MESSAGES = [{"role": "user", "content": "Reply with the single word: ready"}]
SERVER_FIXES = {
    "vLLM": server_errors.VLLM_TOOLS_FIX,
    "SGLang": server_errors.SGLANG_TOOLS_FIX,
    "llama.cpp": server_errors.LLAMA_CPP_TOOLS_FIX,
    "Ollama": server_errors.OLLAMA_TOOLS_FIX,
}
CONTEXT_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length")


@dataclass
class Finding:
    step: str
    ok: bool | None  # None: for information
    text: str
    fix: str = ""


@dataclass
class CheckReport:
    base_url: str
    model: str
    server: str = "unknown"
    context_length: int | None = None
    tool_format: str | None = None
    token_param: str = "max_tokens"
    findings: list[Finding] = field(default_factory=list)

    @property
    def usable(self) -> bool:
        steps = {f.step: f.ok for f in self.findings}
        return steps.get("chat") is True and steps.get("tool calls") is True

    def add(self, step: str, ok: bool | None, text: str, fix: str = "") -> None:
        self.findings.append(Finding(step, ok, text, fix))

    def command(self) -> str:
        """The ``solve`` command line for this endpoint."""
        line = f"cuda-agent solve PROBLEM --model {self.model} --base-url {self.base_url}"
        line += f" --tool-format {self.tool_format or 'auto'}"
        budget = AgentLimits().context_tokens
        if self.context_length is not None and self.context_length < budget:
            line += f" --context-tokens {self.context_length}"
            line += f" --max-output-tokens {max(256, min(8192, self.context_length // 4))}"
        return line + " --out runs/one"

    def to_dict(self) -> dict[str, Any]:
        return {
            **{k: v for k, v in asdict(self).items() if k != "findings"},
            "usable": self.usable,
            "findings": [asdict(f) for f in self.findings],
            "command": self.command() if self.usable else None,
        }


def check_endpoint(
    base_url: str, model: str, api_key: str, probe_tokens: int = 512, timeout_s: float = 60.0
) -> CheckReport:
    report = CheckReport(base_url.rstrip("/"), model)
    if not _list_models(report, api_key, timeout_s):
        return report

    def client(**options: Any) -> OpenAIChatModel:
        made = OpenAIChatModel(
            model, report.base_url, api_key, max_retries=1, timeout_s=timeout_s, backoff_s=0.5,
            **options,
        )  # fmt: skip
        made.token_param = report.token_param
        return made

    chat = client(tool_format="native")
    try:
        turn = chat.complete(CHAT_MESSAGES, [], probe_tokens)
    except ModelError as err:
        report.add("chat", False, str(err), _fix_of(str(err)))
        return report
    report.token_param = chat.token_param
    report.add("chat", True, f"answers ({chat.token_param}): {_said(turn)}")
    if turn.reasoning:
        field_name = chat.reasoning_key or "<think> in content"
        report.add("reasoning", None, f"returned apart ({field_name}); kept in trajectories")
    _probe_tools(report, client(tool_format="auto"), probe_tokens)
    streamed = client(tool_format="native", stream=True)
    try:
        streamed.complete(CHAT_MESSAGES, [], probe_tokens)
        report.add("streaming", True, "streamed replies work (--stream)")
    except ModelError as err:
        report.add("streaming", False, f"streaming failed: {err}", "leave --stream off")
    return report


def _list_models(report: CheckReport, api_key: str, timeout_s: float) -> bool:
    """``GET /models``; False when the endpoint cannot be used at all."""
    try:
        listing = wire.get_json(report.base_url, "/models", api_key, timeout_s)
    except wire.Unreachable as err:
        report.add(
            "endpoint",
            False,
            f"cannot reach {report.base_url}: {err}",
            "start the server, check host and port; the base URL usually ends in /v1 "
            "(http://HOST:8000/v1)",
        )
        return False
    except wire.HTTPFailure as failure:
        problem = server_errors.classify(failure.status, failure.body)
        if problem.kind == "auth":
            report.add("endpoint", False, problem.describe(), problem.fix)
            return False
        fix = "" if report.base_url.endswith("/v1") else "the base URL usually ends in /v1"
        report.add("endpoint", None, f"GET /models answered HTTP {failure.status}", fix)
        return True
    entries = [e for e in (listing.get("data") or []) if isinstance(e, dict)]
    ids = [str(e.get("id")) for e in entries]
    report.server = _server_kind(entries, report.base_url)
    report.add("endpoint", True, f"{report.base_url} answers ({report.server})")
    entry = next((e for e in entries if e.get("id") == report.model), None)
    if ids and entry is None:
        report.add(
            "model",
            False,
            f"{report.model} is not listed; served: {', '.join(ids[:8])}",
            f"--model {ids[0]}",
        )
    elif entry is not None:
        report.add("model", True, f"{report.model} is served")
    _context_length(report, entry or {})
    return True


def _context_length(report: CheckReport, entry: dict[str, Any]) -> None:
    meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    found = [(k, entry[k]) for k in CONTEXT_KEYS if isinstance(entry.get(k), int)]
    for key in ("n_ctx", "n_ctx_train"):
        if isinstance(meta.get(key), int):
            found.append((f"meta.{key}", meta[key]))
    budget = AgentLimits().context_tokens
    if not found:
        fix = ""
        if report.server == "Ollama":
            fix = "Ollama's window is num_ctx (set OLLAMA_CONTEXT_LENGTH on the server)"
        report.add("context", None, "not reported by the server", fix)
        return
    source, length = found[0]
    report.context_length = length
    fix = ""
    if length < budget:
        fix = f"pass --context-tokens {length} (the agent's default budget is {budget})"
    report.add("context", None, f"{length} tokens ({source})", fix)


def _probe_tools(report: CheckReport, auto: OpenAIChatModel, probe_tokens: int) -> None:
    try:
        turn = auto.complete(PROBE_MESSAGES, [PROBE_TOOL], probe_tokens)
    except ModelError as err:
        report.add("tool calls", False, str(err), _fix_of(str(err)))
        return
    if not turn.tool_calls:
        report.add(
            "tool calls",
            False,
            f"the model answered without calling the tool: {_said(turn)}",
            "serve a model trained for tool calls (Qwen2.5/Qwen3 Instruct, Llama 3.1+ ...) "
            f"with its tool parser; {server_errors.GENERIC_TOOLS_FIX}",
        )
        return
    report.tool_format = auto.protocol
    call = turn.tool_calls[0]
    quality = ""
    if not _well_formed(call.name, call.arguments):
        quality = f" (malformed: {call.name} {call.arguments[:80]})"
    if auto.protocol == "native":
        report.add("tool calls", True, f"native tool_calls{quality}")
        return
    fix = SERVER_FIXES.get(report.server, server_errors.GENERIC_TOOLS_FIX)
    report.add(
        "tool calls",
        True,
        f"as text ({auto.protocol} form){quality}: works with --tool-format auto or "
        f"{auto.protocol}; native calls need the server's tool parser",
        fix,
    )


def _well_formed(name: str, arguments: str) -> bool:
    try:
        return name == "echo_text" and isinstance(json.loads(arguments).get("text"), str)
    except (ValueError, AttributeError):
        return False


def _said(turn: AssistantTurn) -> str:
    text = (turn.content or "").strip().replace("\n", " ")
    return repr(text[:80]) if text else f"(no text; finish {turn.finish_reason})"


def _fix_of(message: str) -> str:
    return message.partition("(fix: ")[2].removesuffix(")") if "(fix: " in message else ""


def _server_kind(entries: list[dict[str, Any]], base_url: str) -> str:
    owners = {str(e.get("owned_by") or "").lower() for e in entries}
    kinds = {
        "vllm": "vLLM",
        "sglang": "SGLang",
        "llamacpp": "llama.cpp",
        "deepseek": "DeepSeek",
        "system": "OpenAI",
        "openai": "OpenAI",
        "library": "Ollama",
    }
    for owner, kind in kinds.items():
        if owner in owners:
            return kind
    if ":11434" in base_url:
        return "Ollama"
    if any(e.get("display_name") and e.get("type") == "model" for e in entries):
        return "Anthropic"
    return "unknown"
