"""The episode's record: every event appended to ``trajectory.jsonl`` as it happens.

Each line is one JSON object with ``kind`` (start, message, tool_result, usage, evaluation,
exit, error) and a timestamp. Lines are flushed and synced at once, so a crash loses nothing;
``load_messages`` rebuilds the chat transcript so an interrupted run can resume, and
``assistant_turns`` extracts the model's turns (with their reasoning) so a run can be replayed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class Trajectory:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - held for the episode

    def event(self, kind: str, **data: Any) -> None:
        line = json.dumps({"t": round(time.time(), 3), "kind": kind, **data}, default=str)
        self._handle.write(line + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line from a crash: everything before it is intact
    return events


def load_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages recorded so far (system, user, assistant, tool), in order."""
    messages = [e["message"] for e in events if e.get("kind") in ("message", "tool_result")]
    last = max((i for i, m in enumerate(messages) if m.get("tool_calls")), default=None)
    if last is not None:
        answered = {m.get("tool_call_id") for m in messages[last + 1 :] if m.get("role") == "tool"}
        if not all(c["id"] in answered for c in messages[last]["tool_calls"]):
            messages = messages[:last]  # a turn cut off mid-way is dropped and asked again
    return messages


def assistant_turns(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The model's turns in replay-script form (content + tool calls with their arguments)."""
    turns = []
    for event in events:
        message = event.get("message") or {}
        if event.get("kind") != "message" or message.get("role") != "assistant":
            continue
        turn: dict[str, Any] = {"content": message.get("content")}
        if message.get("reasoning_content"):
            turn["reasoning_content"] = message["reasoning_content"]
        turns.append(
            {
                **turn,
                "tool_calls": [
                    {
                        "id": c["id"],
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                    for c in message.get("tool_calls") or []
                ],
            }
        )
    return turns
