"""The client and the loop against each provider's documented behaviour, over real HTTP.

Every fixture of ``provider_fixtures`` (written from the provider's documentation) is served
by a local HTTP server; the agent loop plays a two-turn episode against it (a ``read_file``
call, then a final answer), plain and streamed, through the ``openai`` package and the
standard library. The episode must end ``submitted`` after running the tool, with the
reasoning the server returned kept in the trajectory and the client's adaptation recorded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.agent.context_trim import TRIMMED
from cuda_agent.agent.loop import AgentLimits, LoopResult, run_loop
from cuda_agent.agent.models import ContextOverflow, OpenAIChatModel
from cuda_agent.agent.server_errors import classify
from cuda_agent.agent.tools.base import ToolContext
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory, load_messages, read_events
from tests.agent import provider_fixtures as fx
from tests.agent.provider_server import Provider, ProviderServer, completion


def play(
    tmp_path: Path,
    provider: Provider,
    *,
    stream: bool = False,
    transport: str = "auto",
    tool_format: str = "auto",
    temperature: float | None = None,
    **limits: Any,
) -> tuple[LoopResult, list[dict[str, Any]], ProviderServer]:
    (tmp_path / "notes.txt").write_text("hello\n")
    trajectory = Trajectory(tmp_path / "t.jsonl")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    with ProviderServer(provider) as server:
        model = OpenAIChatModel(
            "model-x",
            server.base_url,
            "key",
            max_retries=2,
            backoff_s=0.01,
            tool_format=tool_format,
            stream=stream,
            transport=transport,
            temperature=temperature,
        )
        limits.setdefault("max_output_tokens", 256)
        result = run_loop(
            model,
            default_tools(),
            ToolContext(workdir=tmp_path),
            messages,
            AgentLimits(**limits),
            trajectory,
        )
    trajectory.close()
    return result, read_events(tmp_path / "t.jsonl"), server


def assistant_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e["message"]
        for e in events
        if e["kind"] == "message" and e["message"]["role"] == "assistant"
    ]


@pytest.mark.parametrize("transport", ["openai", "stdlib"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("name", sorted(fx.AGENTIC))
def test_each_provider_plays_a_tool_episode(
    tmp_path: Path, name: str, stream: bool, transport: str
) -> None:
    provider = fx.AGENTIC[name]()
    result, events, server = play(tmp_path, provider, stream=stream, transport=transport)
    expect = provider.notes
    assert (result.exit_reason, result.turns) == ("submitted", 2), result.detail
    results = [e for e in events if e["kind"] == "tool_result"]
    assert [(r["name"], r["is_error"]) for r in results] == [("read_file", False)]
    assert "hello" in results[0]["message"]["content"]
    first, final = assistant_messages(events)
    assert first["tool_calls"][0]["function"]["name"] == "read_file"
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"path": "notes.txt"}
    assert final["content"] == fx.FINAL
    formats = [e["tool_format"] for e in events if e["kind"] == "message" and "tool_format" in e]
    assert formats[-1] == expect["format"]
    for event in events:  # text the client rewrote is kept as the server sent it
        if "raw_content" in event:
            assert event["raw_content"] != event["message"]["content"]
    first_event = next(e for e in events if e["kind"] == "message" and "tool_format" in e)
    if first_event["tool_format"] != "native":  # calls read from the text
        assert "read_file" in first_event["raw_content"]
    if "reasoning" in expect:
        assert expect["reasoning"] in first["reasoning_content"]
        assert "<think>" not in first["content"]
    notes = " ".join(e["note"] for e in events if e["kind"] == "model_note")
    assert expect.get("note", "") in notes
    if "note" not in expect:
        assert notes == ""
    # the last request carried the tool result in the form the server was spoken to in
    last = server.requests[-1]
    if expect["format"] == "native":
        assert last["tools"] and any(m["role"] == "tool" for m in last["messages"])
    else:
        assert "tools" not in last and not any(m["role"] == "tool" for m in last["messages"])
    assert ("stream" in last) == stream


def test_the_issue_case_text_calls_are_run_not_taken_for_an_answer(tmp_path: Path) -> None:
    """SGLang without a tool parser: the first reply is a Hermes call in ``content``."""
    result, events, server = play(tmp_path, fx.sglang_no_tool_parser())
    assert (result.exit_reason, result.turns) == ("submitted", 2)
    assert any(e["kind"] == "tool_result" for e in events)
    second = server.requests[1]["messages"]
    assert "<tool_call>" in second[0]["content"]  # the protocol is in the system message
    assert second[-2]["role"] == "assistant" and "<tool_call>" in second[-2]["content"]
    assert (
        second[-1]["role"] == "user" and "<tool_response>\n     1\thello" in second[-1]["content"]
    )
    # the trajectory keeps the native form, so RFT and resume read it as any other
    messages = load_messages(events)  # (play() records the loop's messages only)
    assert messages[0]["tool_calls"][0]["function"]["name"] == "read_file"
    assert messages[1]["role"] == "tool"


def test_native_only_against_a_server_without_tool_parser_is_one_clear_error(
    tmp_path: Path,
) -> None:
    result, _, server = play(tmp_path, fx.vllm_no_tool_parser(), tool_format="native")
    assert result.exit_reason == "model_error" and result.turns == 0
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in result.detail
    assert len(server.requests) == 1  # a 400 is not retried


def test_llamacpp_refusing_tools_with_500_is_not_retried(tmp_path: Path) -> None:
    result, _, server = play(tmp_path, fx.llamacpp_no_jinja(), tool_format="native")
    assert result.exit_reason == "model_error" and "--jinja" in result.detail
    assert len(server.requests) == 1


@pytest.mark.parametrize("fmt", ["hermes", "json"])
def test_explicit_text_formats_never_send_tools(tmp_path: Path, fmt: str) -> None:
    provider = fx.vllm_no_tool_parser() if fmt == "hermes" else fx.ollama_model_without_tools()
    result, events, server = play(tmp_path, provider, tool_format=fmt)
    assert (result.exit_reason, result.turns) == ("submitted", 2)
    assert all("tools" not in body for body in server.requests)
    assert not [e for e in events if e["kind"] == "model_note"]  # nothing to adapt


def test_openai_reasoning_model_gets_max_completion_tokens_once(tmp_path: Path) -> None:
    result, events, server = play(tmp_path, fx.openai_reasoning(), temperature=0.2)
    assert result.exit_reason == "submitted"
    keys = [("max_tokens" in b, "max_completion_tokens" in b, "temperature" in b) for b in
            server.requests]  # fmt: skip
    # max_tokens refused, then temperature refused, then every request in the accepted form
    assert keys == [(True, False, True), (False, True, True), (False, True, False),
                    (False, True, False)]  # fmt: skip
    notes = [e["note"] for e in events if e["kind"] == "model_note"]
    assert len(notes) == 2 and "max_completion_tokens" in notes[0]


def test_a_refusal_ends_the_episode_as_refused(tmp_path: Path) -> None:
    result, events, _ = play(tmp_path, fx.openai_refusal(), stream=True)
    assert (result.exit_reason, result.turns) == ("refused", 1)
    assert "cannot help" in result.detail
    assert assistant_messages(events)[0]["refusal"].startswith("I'm sorry")


def test_deepseek_gets_its_reasoning_back_on_tool_turns(tmp_path: Path) -> None:
    _, _, server = play(tmp_path, fx.deepseek())
    sent = [m for m in server.requests[1]["messages"] if m.get("tool_calls")]
    assert sent[0]["reasoning_content"] == "The user wants the notes; call read_file."


def test_reasoning_goes_back_under_the_servers_field_and_never_unasked(tmp_path: Path) -> None:
    _, _, server = play(tmp_path, fx.vllm_tool_parser())
    sent = next(m for m in server.requests[1]["messages"] if m.get("tool_calls"))
    assert "reasoning" in sent and "reasoning_content" not in sent
    with ProviderServer(fx.anthropic()) as other:  # returns no reasoning
        model = OpenAIChatModel("claude", other.base_url, "k")
        history = [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "a", "reasoning_content": "hidden"},
            {"role": "user", "content": "v"},
        ]
        model.complete(history, [], 16)
    assert all("reasoning" not in k for m in other.requests[0]["messages"] for k in m)


def test_context_overflow_trims_the_oldest_tool_output_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("\n".join(["word " * 40] * 60))  # ~12k characters
    prompts: list[int] = []
    result, events, server = play(
        tmp_path, fx.vllm_context(limit=2500, max_prompt_seen=prompts), max_output_tokens=256
    )
    assert (result.exit_reason, result.turns) == ("submitted", 2), result.detail
    trims = [e for e in events if e["kind"] == "context_trim"]
    assert len(trims) == 1 and trims[0]["outputs"] == 1
    assert "context window 2500 tokens" in trims[0]["server"]
    assert len(server.requests) == 3  # the call, the overflow, the retry
    retry = server.requests[2]["messages"]
    assert [m["content"] for m in retry if m["role"] == "tool"] == [TRIMMED]
    assert prompts[2] + 256 <= 2500
    full = next(e for e in events if e["kind"] == "tool_result")
    assert full["full_chars"] > 10000  # the trajectory keeps the output in full


def test_context_overflow_again_after_trimming_exits_with_the_counts(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 4000)
    result, events, _ = play(tmp_path, fx.vllm_context(limit=300), max_output_tokens=256)
    assert result.exit_reason == "context_overflow"
    assert "context window 300 tokens" in result.detail
    assert "after trimming 1 tool output" in result.detail
    assert events[-1]["kind"] == "exit" and events[-1]["reason"] == "context_overflow"


@pytest.mark.parametrize("provider", sorted(fx.CONTEXT_ERRORS))
def test_each_providers_context_message_is_read_with_its_counts(provider: str) -> None:
    status, body, limit, requested = fx.CONTEXT_ERRORS[provider]
    problem = classify(status, json.dumps(body))
    assert problem.kind == "context_overflow"
    assert (problem.limit, problem.requested) == (limit, requested)
    assert not problem.transient


def test_a_context_error_reaches_the_caller_as_context_overflow() -> None:
    status, body, _, _ = fx.CONTEXT_ERRORS["llama.cpp"]
    provider = Provider("llama.cpp", "", lambda b, i: (status, body))
    with ProviderServer(provider) as server:
        model = OpenAIChatModel("m", server.base_url, "k", max_retries=0)
        with pytest.raises(ContextOverflow) as caught:
            model.complete([{"role": "user", "content": "hi"}], [], 16)
    assert (caught.value.limit, caught.value.prompt) == (8192, 9412)


def test_a_text_call_slipping_past_a_working_parser_is_read_without_switching(
    tmp_path: Path,
) -> None:
    """vLLM's parser leaves a call it cannot parse in ``content``: read it, stay native."""

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        results = sum(1 for m in body["messages"] if m["role"] == "tool")
        if results == 0:
            message = {"content": None, "tool_calls": [fx.native_call("chatcmpl-tool-1")]}
            return 200, completion(message, "tool_calls")
        if results == 1:
            return 200, completion({"content": fx.HERMES_CALL}, "stop")
        return 200, completion({"content": fx.FINAL})

    result, events, server = play(tmp_path, Provider("vllm", "", respond))
    assert (result.exit_reason, result.turns) == ("submitted", 3)
    assert len([e for e in events if e["kind"] == "tool_result"]) == 2
    assert all(body.get("tools") for body in server.requests)  # still native
    notes = [e["note"] for e in events if e["kind"] == "model_note"]
    assert notes == ["a reply carried its tool calls as text (hermes form); read them"]
