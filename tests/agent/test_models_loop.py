"""Model clients against a real local HTTP server, and every exit of the loop."""

import json
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.agent.loop import AgentLimits, run_loop
from cuda_agent.agent.models import AssistantTurn, ModelError, OpenAIChatModel, ScriptedModel
from cuda_agent.agent.replay_server import ReplayServer
from cuda_agent.agent.tools.base import ToolContext
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory, read_events

READ = {"name": "read_file", "arguments": {"path": "notes.txt"}}


def test_openai_client_round_trip_with_tool_calls_and_retries() -> None:
    with ReplayServer([{"content": "looking", "tool_calls": [READ]}], fail_first=2) as server:
        model = OpenAIChatModel("m", server.base_url, "key", max_retries=3, backoff_s=0.01)
        turn = model.complete([{"role": "user", "content": "hi"}], default_tools().schemas(), 64)
    assert turn.content == "looking" and turn.tool_calls[0].name == "read_file"
    assert json.loads(turn.tool_calls[0].arguments) == {"path": "notes.txt"}
    assert turn.usage is not None and turn.usage.prompt_tokens > 0
    assert len(server.requests) == 3  # two 503s, then the answer
    assert server.requests[-1]["tools"][0]["function"]["name"] == "bash"


def test_openai_client_gives_up_after_its_retries() -> None:
    with ReplayServer([{"content": "late"}], fail_first=10) as server:
        model = OpenAIChatModel("m", server.base_url, "key", max_retries=1, backoff_s=0.01)
        with pytest.raises(ModelError, match="gave up after 2 attempts"):
            model.complete([{"role": "user", "content": "hi"}], [], 64)


def test_stdlib_transport_speaks_the_same_protocol() -> None:
    with ReplayServer([{"content": "looking", "tool_calls": [READ]}]) as server:
        model = OpenAIChatModel("m", server.base_url, "key", transport="stdlib")
        turn = model.complete([{"role": "user", "content": "hi"}], default_tools().schemas(), 64)
    assert turn.content == "looking" and turn.tool_calls[0].name == "read_file"
    assert server.requests[0]["max_tokens"] == 64


def run(tmp_path: Path, turns: list[dict[str, Any]], **limits: Any):
    if not (tmp_path / "notes.txt").exists():
        (tmp_path / "notes.txt").write_text("hello\n")
    trajectory = Trajectory(tmp_path / "t.jsonl")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    result = run_loop(
        ScriptedModel(turns),
        default_tools(),
        ToolContext(workdir=tmp_path),
        messages,
        AgentLimits(**limits),
        trajectory,
    )
    trajectory.close()
    return result, messages, read_events(tmp_path / "t.jsonl")


def test_submitted_when_the_model_stops_calling_tools(tmp_path: Path) -> None:
    result, messages, events = run(tmp_path, [{"tool_calls": [READ]}, {"content": "done"}])
    assert (result.exit_reason, result.turns) == ("submitted", 2)
    assert "     1\thello" in messages[3]["content"]
    assert [e["kind"] for e in events][-1] == "exit"


def test_turn_limit(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"tool_calls": [READ]}] * 10, max_turns=3)
    assert (result.exit_reason, result.turns) == ("turn_limit", 3)


def test_token_budget_counts_the_context(tmp_path: Path) -> None:
    big = {"name": "read_file", "arguments": {"path": "big.txt"}}
    (tmp_path / "big.txt").write_text("\n".join(["word " * 50] * 200))
    result, _, _ = run(
        tmp_path,
        [{"tool_calls": [big]}] * 10,
        context_tokens=6000,
        max_output_tokens=500,
        tool_output_chars=100_000,
    )
    assert result.exit_reason == "token_budget"
    assert result.turns < 10


def test_wall_clock(tmp_path: Path) -> None:
    result, _, _ = run(tmp_path, [{"tool_calls": [READ]}] * 5, wall_clock_s=0.0)
    assert result.exit_reason == "wall_clock"


def test_repeated_format_errors(tmp_path: Path) -> None:
    bad = {"name": "no_such_tool", "arguments": {}}
    result, messages, _ = run(tmp_path, [{"tool_calls": [bad]}] * 10, max_format_errors=3)
    assert (result.exit_reason, result.turns) == ("format_errors", 3)
    assert "unknown tool" in messages[-1]["content"]


def test_model_error_is_an_exit(tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def complete(self, *args: Any) -> AssistantTurn:
            raise ModelError("endpoint down")

    trajectory = Trajectory(tmp_path / "t.jsonl")
    result = run_loop(
        Broken(), default_tools(), ToolContext(workdir=tmp_path), [], AgentLimits(), trajectory
    )
    assert (result.exit_reason, result.detail) == ("model_error", "endpoint down")


def test_cut_off_replies_are_nudged_then_counted(tmp_path: Path) -> None:
    cut = {"content": "partial", "finish_reason": "length"}
    result, messages, _ = run(tmp_path, [cut, {"content": "done"}])
    assert result.exit_reason == "submitted"
    assert any("cut off" in str(m.get("content")) for m in messages if m["role"] == "user")
    result, _, _ = run(tmp_path, [cut] * 5, max_format_errors=2)
    assert result.exit_reason == "format_errors"


def test_long_tool_output_is_truncated_for_the_model(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("\n".join(f"line {i}" for i in range(3000)))
    _, messages, events = run(
        tmp_path, [{"tool_calls": [READ]}, {"content": "ok"}], tool_output_chars=500
    )
    tool_message = messages[3]["content"]
    assert len(tool_message) < 700 and "characters omitted" in tool_message
    assert next(e for e in events if e["kind"] == "tool_result")["full_chars"] > 10_000
