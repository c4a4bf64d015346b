"""An episode's turns as progress: each tool call the model makes becomes the stage of a
``progress_log.Status`` (a line per turn in a log, the spinner's text on a terminal).

``follow_episode(trajectory, status)`` is a context manager: while its block runs (the
episode), a thread reads the lines the episode appends to ``trajectory.jsonl`` (flushed as
they happen, ``agent/trajectory.py``) every ``POLL_S`` seconds and reports each assistant turn
as ``turn N: <call>`` (``episode_view.describe_call``: ``bash: cuda-agent tool verify``,
``write_file kernels/k.cu``). A torn last line is read again on the next poll.

What it does not do: change the episode, or report tool output (the panel after the episode
does).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path

from cuda_agent.cli.episode_view import describe_call
from cuda_agent.cli.progress_log import Status

POLL_S = 0.5


@contextlib.contextmanager
def follow_episode(trajectory: Path, status: Status) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(
        target=_follow, args=(trajectory, status, stop), daemon=True, name="episode-follow"
    )
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


class _State:
    def __init__(self) -> None:
        self.offset = 0
        self.turn = 0


def _follow(trajectory: Path, status: Status, stop: threading.Event) -> None:
    state = _State()
    while not stop.wait(POLL_S):
        _read_new(trajectory, status, state)
    _read_new(trajectory, status, state)  # the last turns before the episode ended


def _read_new(trajectory: Path, status: Status, state: _State) -> None:
    try:
        with open(trajectory, "rb") as handle:
            handle.seek(state.offset)
            data = handle.read()
    except OSError:
        return
    complete = data[: data.rfind(b"\n") + 1]
    state.offset += len(complete)
    for line in complete.decode("utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        message = event.get("message") or {}
        if event.get("kind") != "message" or message.get("role") != "assistant":
            continue
        calls = message.get("tool_calls") or []
        state.turn += 1
        said = ", ".join(describe_call(c.get("function") or {}) for c in calls) or "final reply"
        status.update(f"turn {state.turn}: {said}")
