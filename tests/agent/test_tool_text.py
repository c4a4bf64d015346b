"""Text tool-call protocols, reasoning in text, and merging a streamed reply."""

from __future__ import annotations

import json

from cuda_agent.agent.tool_text import parse_calls, split_reasoning, to_text_messages
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.wire import merge_stream

TOOLS = default_tools().schemas()
NAMES = {t["function"]["name"] for t in TOOLS}


def test_hermes_blocks_several_unclosed_and_the_text_around() -> None:
    text = (
        "Let me look.\n<tool_call>\n"
        '{"name": "read_file", "arguments": {"path": "a.py"}}\n</tool_call>\n'
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}'  # cut at the stop token
    )
    content, calls = parse_calls(text, "hermes")
    assert content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("read_file", {"path": "a.py"}),
        ("bash", {"command": "ls"}),
    ]


def test_hermes_with_broken_json_becomes_a_call_the_registry_rejects() -> None:
    _, calls = parse_calls(
        '<tool_call>{"name": "bash", "arguments": {"command": }</tool_call>', "hermes"
    )
    assert calls[0].name == "bash"
    outcome = default_tools().call(None, calls[0].name, calls[0].arguments)  # type: ignore[arg-type]
    assert outcome.format_error and "not valid JSON" in outcome.text


def test_qwen3_coder_xml_inside_the_tags() -> None:
    text = (
        "<tool_call>\n<function=bash>\n<parameter=command>\nls -la\n</parameter>\n"
        "<parameter=timeout>\n30\n</parameter>\n</function>\n</tool_call>"
    )
    _, calls = parse_calls(text, "hermes")
    assert calls[0].name == "bash"
    assert json.loads(calls[0].arguments) == {"command": "ls -la", "timeout": 30}


def test_json_replies_fenced_listed_and_false_positives() -> None:
    fenced = '```json\n{"name": "read_file", "parameters": {"path": "x"}}\n```'
    content, calls = parse_calls(fenced, "json", NAMES)
    assert content == "" and calls[0].name == "read_file"
    assert json.loads(calls[0].arguments) == {"path": "x"}
    listed = json.dumps([{"name": "glob", "arguments": {"pattern": "*.cu"}}] * 2)
    assert len(parse_calls(listed, "json", NAMES)[1]) == 2
    # a JSON answer that names no tool of ours is an answer, not a call
    answer = '{"name": "speed-up", "value": 1.3}'
    assert parse_calls(answer, "json", NAMES) == (answer, [])
    assert parse_calls("plain prose", "json", NAMES) == ("plain prose", [])


def test_think_blocks_come_out_of_the_text() -> None:
    assert split_reasoning("<think>\nplan\n</think>\n\nanswer") == ("plan", "answer")
    assert split_reasoning("plan without opening tag</think>answer") == (
        "plan without opening tag",
        "answer",
    )
    assert split_reasoning("<think>cut off mid-thought") == ("cut off mid-thought", "")
    assert split_reasoning("no thinking") == (None, "no thinking")


def test_native_history_rewritten_in_each_text_protocol() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "bash", "arguments": '{"command": "ls"}'},
    }
    history = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"},
        {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "out1"},
        {"role": "tool", "tool_call_id": "c2", "content": "out2"},
    ]
    hermes = to_text_messages(history, TOOLS, "hermes")
    assert (
        hermes[0]["content"].startswith("S\n\n# Tools") and '"name": "bash"' in hermes[0]["content"]
    )
    assert hermes[2]["content"].count("<tool_call>") == 2
    assert [m["role"] for m in hermes] == ["system", "user", "assistant", "user"]
    assert hermes[3]["content"].count("<tool_response>") == 2
    as_json = to_text_messages(history, TOOLS, "json")
    assert json.loads(as_json[2]["content"])[0] == {"name": "bash", "arguments": {"command": "ls"}}
    assert [m["content"] for m in as_json[3:]] == ["Result of bash:\nout1", "Result of bash:\nout2"]
    assert all("tool_calls" not in m for m in hermes + as_json)


def test_streamed_fragments_merge_into_one_reply() -> None:
    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def call(index: int, arguments: str, **opening: str) -> dict:
        function = {"arguments": arguments}
        if "name" in opening:
            function["name"] = opening["name"]
        head = {"id": opening["id"]} if "id" in opening else {}
        return chunk({"tool_calls": [{"index": index, **head, "function": function}]})

    chunks = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "thin"}),
        chunk({"reasoning_content": "king"}),
        call(0, "", id="a", name="bash"),
        call(1, '{"pa', id="b", name="glob"),
        call(0, '{"command": "ls"}'),
        call(1, 'ttern": "*"}'),
        chunk({}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7}},
    ]
    merged = merge_stream(chunks)
    message = merged["choices"][0]["message"]
    assert message["reasoning_content"] == "thinking" and message["content"] is None
    got = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in
           message["tool_calls"]]  # fmt: skip
    assert got == [("a", "bash", {"command": "ls"}), ("b", "glob", {"pattern": "*"})]
    assert merged["choices"][0]["finish_reason"] == "tool_calls"
    assert merged["usage"] == {"prompt_tokens": 5, "completion_tokens": 7}
