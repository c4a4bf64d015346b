"""An agent attempt's ``trajectory.jsonl`` as plain data for the report's trajectory viewer.

``trajectory_view`` reads one trajectory file (tolerating a missing, empty or partly corrupt
file: what could not be read becomes a note) and turns its events into turns (a setup block,
then one per assistant message) of event views: episode notes, the system prompt, messages
with their tool calls and arguments, tool results, evaluations, the exit. Long texts are cut
to their head and tail, and lines of tool output that look like errors are marked.

Everything here is plain text and numbers; nothing builds or escapes HTML (the templates do,
``templates/_trajectories.html.j2``), and nothing writes to the run folder.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from cuda_agent.bench.records import AttemptRecord
from cuda_agent.bench.report_format import as_number, compact, eval_summary, truncate, verdict
from cuda_agent.core.types import EvalResult

MAX_TOOL_OUTPUT = 6000  # characters of a tool result shown (head and tail)
MAX_TEXT = 20000  # characters of an assistant message or argument shown
MAX_EVAL_ERROR = 3000  # characters of an evaluation's error message shown
_ERROR_LINE = re.compile(r"(?i)\b(error|fatal|undefined reference|traceback)\b")


def trajectory_anchor(problem_id: str) -> str:
    """The element id of a problem's trajectory section (stable, safe in HTML and URLs)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", problem_id)
    if safe != problem_id or not safe:
        safe += "-" + hashlib.sha1(problem_id.encode("utf-8")).hexdigest()[:8]
    return "traj-" + safe


# --------------------------------------------------------------------------- views


@dataclass(frozen=True)
class Line:
    text: str
    error: bool = False  # looks like a compiler error or a traceback


@dataclass(frozen=True)
class TextBlock:
    """A text shown as it is (preformatted): its lines, and how much of it was cut.

    ``style`` names what the text is: ``msg`` (a message), ``args`` (a tool call's argument)
    or ``out`` (tool output, an error)."""

    lines: list[Line]
    style: str
    cut: int  # characters not shown
    total: int  # characters in all

    @property
    def cut_note(self) -> str:
        return f"[{self.cut:,} of {self.total:,} characters not shown]"


@dataclass(frozen=True)
class Note:
    """A one-line event: episode start, resume and end (``meta``), the exit (``exit``), an
    evaluation with no result (``eval fail``), or an event of an unknown kind (``meta``)."""

    kind: ClassVar[str] = "note"
    text: str
    style: str


@dataclass(frozen=True)
class SystemPrompt:
    kind: ClassVar[str] = "system"
    length: int
    block: TextBlock

    @property
    def title(self) -> str:
        return f"System prompt ({self.length:,} characters)"


@dataclass(frozen=True)
class ToolCall:
    name: str
    raw: TextBlock | None  # the arguments as given, when they are not a JSON object
    args: list[tuple[str, TextBlock]]  # else one block per argument


@dataclass(frozen=True)
class Message:
    kind: ClassVar[str] = "message"
    role: str
    text: TextBlock | None
    calls: list[ToolCall]


@dataclass(frozen=True)
class ToolResult:
    kind: ClassVar[str] = "tool_result"
    head: str
    is_error: bool
    block: TextBlock


@dataclass(frozen=True)
class Evaluation:
    kind: ClassVar[str] = "evaluation"
    head: str
    status: str  # ok / fail
    error: TextBlock | None
    details: list[tuple[str, str]]  # verify, timing, profile, kernels (compact JSON)


Event = Note | SystemPrompt | Message | ToolResult | Evaluation


@dataclass(frozen=True)
class Turn:
    title: str
    events: list[Event]


@dataclass(frozen=True)
class TrajectoryView:
    anchor: str
    summary: str
    file: str
    note: str | None  # what could not be read
    turns: list[Turn]
    usage: str | None  # model calls and tokens


# --------------------------------------------------------------------------- reading


def read_trajectory(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """A trajectory's events and a note on what could not be read (None when all was read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return [], f"trajectory file unreadable: {err.strerror or err}"
    events, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(event, dict):
            events.append(event)
        else:
            bad += 1
    note = f"{bad} unreadable line(s) skipped" if bad else None
    if not events and note is None:
        note = "trajectory file is empty"
    return events, note


def trajectory_view(run_dir: Path, record: AttemptRecord) -> TrajectoryView:
    """The viewer's data for ``record``'s trajectory (a path relative to ``run_dir``)."""
    events, note = read_trajectory(run_dir / str(record.trajectory))
    exit_event = next((e for e in reversed(events) if e.get("kind") == "exit"), None)
    summary = [record.problem_id]
    if record.level is not None:
        summary.append(f"level {record.level}")
    if exit_event is not None:
        summary.append(f"exit: {exit_event.get('reason')} after {exit_event.get('turns')} turns")
    summary.append(verdict(record.result)[0])
    return TrajectoryView(
        anchor=trajectory_anchor(record.problem_id),
        summary=" — ".join(summary),
        file=str(record.trajectory),
        note=note,
        turns=turns(events),
        usage=usage_summary(events),
    )


def turns(events: list[dict[str, Any]]) -> list[Turn]:
    """The events grouped into a setup block and one turn per assistant message (empty ones
    left out)."""
    blocks: list[tuple[str, list[Event]]] = [("Setup", [])]
    turn = 0
    for event in events:
        raw = event.get("message")
        message: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if event.get("kind") == "message" and message.get("role") == "assistant":
            turn += 1
            blocks.append((f"Turn {event.get('turn', turn)}", []))
        view = event_view(event, message)
        if view is not None:
            blocks[-1][1].append(view)
    return [Turn(title, views) for title, views in blocks if views]


# --------------------------------------------------------------------------- events


def text_block(text: str, limit: int, style: str = "out", highlight: bool = False) -> TextBlock:
    """``text`` cut to ``limit`` characters, its error-looking lines marked if ``highlight``."""
    shown, cut = truncate(text, limit)
    lines = [Line(line, highlight and bool(_ERROR_LINE.search(line))) for line in shown.split("\n")]
    return TextBlock(lines, style, cut, len(text))


def event_view(event: dict[str, Any], message: dict[str, Any]) -> Event | None:
    """The view of one event (None for events not shown: usage, empty messages)."""
    kind = event.get("kind")
    if kind == "start":
        fields = {k: event.get(k) for k in ("problem", "model", "backend") if event.get(k)}
        text = ", ".join(f"{k}: {v}" for k, v in fields.items())
        return Note(f"Episode started ({text})", "meta")
    if kind == "resume":
        return Note(f"Resumed with {event.get('messages')} messages", "meta")
    if kind == "message":
        return message_view(message)
    if kind == "tool_result":
        return tool_result_view(event, message)
    if kind == "evaluation":
        return evaluation_view(event)
    if kind == "exit":
        detail = f" ({event['detail']})" if event.get("detail") else ""
        return Note(f"Exit: {event.get('reason')} after {event.get('turns')} turns{detail}", "exit")
    if kind == "end":
        return Note(f"End of episode, reward {event.get('reward')}", "meta")
    if kind == "usage":
        return None
    other = {k: v for k, v in event.items() if k != "t"}
    return Note(f"{kind}: {compact(other)}", "meta")


def message_view(message: dict[str, Any]) -> SystemPrompt | Message | None:
    role = str(message.get("role", "?"))
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = "" if content is None else compact(content, MAX_TEXT)
    if role == "system":
        return SystemPrompt(len(text), text_block(text, MAX_TEXT, "msg"))
    block = text_block(text, MAX_TEXT, "msg") if text.strip() else None
    calls = [tool_call_view(call) for call in message.get("tool_calls") or []]
    if block is None and not calls:
        return None
    return Message(role, block, calls)


def tool_call_view(call: Any) -> ToolCall:
    function = call.get("function", {}) if isinstance(call, dict) else {}
    name = str(function.get("name", "?"))
    raw = function.get("arguments", "")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        args = None
    if not isinstance(args, dict):
        return ToolCall(name, text_block(str(raw), MAX_TEXT, "args"), [])
    shown = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        shown.append((str(key), text_block(text, MAX_TEXT, "args")))
    return ToolCall(name, None, shown)


def tool_result_view(event: dict[str, Any], message: dict[str, Any]) -> ToolResult:
    content = message.get("content")
    text = content if isinstance(content, str) else compact(content, MAX_TOOL_OUTPUT)
    bits = [f"Tool result: {event.get('name', '?')}"]
    seconds = as_number(event.get("seconds"))
    if seconds is not None:
        bits.append(f"{seconds:.2f} s")
    if event.get("is_error"):
        bits.append("error")
    block = text_block(text, MAX_TOOL_OUTPUT, "out", highlight=True)
    return ToolResult(", ".join(bits), bool(event.get("is_error")), block)


def evaluation_view(event: dict[str, Any]) -> Evaluation | Note:
    head = f"Evaluation ({event.get('source', 'evaluation')})"
    result = event.get("result")
    if not isinstance(result, dict):
        code = event.get("exit_code")
        text = f"{head}: no result" + (f" (exit code {code})" if code is not None else "")
        return Note(text, "eval fail")
    try:
        parsed = EvalResult.from_dict(result)
    except (TypeError, ValueError) as err:
        return Note(f"{head}: a result that is not a verdict ({err})", "eval fail")
    error_block = None
    if parsed.error is not None and parsed.error.message:
        message = f"[{parsed.error.stage}] {parsed.error.message}"
        error_block = text_block(message, MAX_EVAL_ERROR, "out", highlight=True)
    record = parsed.record
    parts = {
        "verify": record.verify if record is not None else None,
        "timing": record.timing if record is not None else None,
        "profile": parsed.profile() or None,
        "kernels": record.kernels if record is not None else None,
    }
    shown = [(key, compact(value)) for key, value in parts.items() if value is not None]
    status = "ok" if parsed.correct else "fail"
    return Evaluation(f"{head}: {eval_summary(parsed)}", status, error_block, shown)


def usage_summary(events: list[dict[str, Any]]) -> str | None:
    """Model calls, completion tokens and the largest prompt of an episode (None: no usage)."""
    usage = [e for e in events if e.get("kind") == "usage"]
    if not usage:
        return None
    prompt = max((as_number(e.get("prompt")) or 0 for e in usage), default=0)
    completion = sum(as_number(e.get("completion")) or 0 for e in usage)
    return (
        f"{len(usage)} model calls, {completion:,.0f} completion tokens, "
        f"largest prompt {prompt:,.0f} tokens"
    )
