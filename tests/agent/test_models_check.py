"""``cuda-agent models check`` against provider fixtures served over real HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from cuda_agent.cli.app import app
from tests.agent import provider_fixtures as fx
from tests.agent.provider_server import Provider, ProviderServer, completion


def check(provider: Provider, *extra: str, model: str = "m") -> tuple[int, str]:
    with ProviderServer(provider) as server:
        args = ["models", "check", "--base-url", server.base_url, "--model", model, *extra]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    return result.exit_code, result.output


def test_a_server_with_a_tool_parser_is_usable_natively() -> None:
    code, out = check(fx.vllm_tool_parser(), model="Qwen/Qwen3-8B")
    assert code == 0, out
    assert "(vLLM)" in out and "Qwen/Qwen3-8B is served" in out
    assert "32768 tokens (max_model_len)" in out and "--context-tokens 32768" in out
    assert "native tool_calls" in out
    assert "returned apart (reasoning)" in out
    assert "usable: cuda-agent solve PROBLEM --model Qwen/Qwen3-8B" in out
    assert "--tool-format native --context-tokens 32768" in out


@pytest.mark.parametrize(
    ("provider", "fix"),
    [
        (fx.vllm_no_tool_parser, "start vLLM with --enable-auto-tool-choice --tool-call-parser"),
        (fx.sglang_no_tool_parser, "start SGLang with --tool-call-parser qwen25"),
        (fx.llamacpp_no_jinja, "start llama-server with --jinja"),
    ],
)
def test_text_tool_calls_are_usable_and_the_fix_is_named(provider: Any, fix: str) -> None:
    code, out = check(provider())
    assert code == 0, out
    assert "as text (hermes form)" in out and f"fix: {fix}" in out
    assert "--tool-format hermes" in out


def test_llamacpp_context_comes_from_its_model_meta() -> None:
    _, out = check(fx.llamacpp_jinja(), model="qwen2.5-7b-instruct-q4_k_m.gguf")
    assert "32768 tokens (meta.n_ctx_train)" in out and "returned apart (reasoning_content)" in out


def test_openai_reasoning_models_are_spoken_to_with_max_completion_tokens() -> None:
    code, out = check(fx.openai_reasoning(), "--json", model="o4-mini")
    report = json.loads(out)
    assert code == 0 and report["usable"] and report["token_param"] == "max_completion_tokens"
    assert report["server"] == "OpenAI" and report["tool_format"] == "native"


def test_an_unknown_model_is_named_with_what_is_served() -> None:
    inner = fx.vllm_tool_parser()

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        if body["model"] != "Qwen/Qwen3-8B":
            message = f"The model `{body['model']}` does not exist."
            return 404, {"error": {"message": message, "type": "NotFoundError", "code": 404}}
        return inner.respond(body, index)

    code, out = check(Provider("vllm", "", respond, fx.VLLM_MODELS), model="qwen")
    assert code == 2
    assert (
        "qwen is not listed; served: Qwen/Qwen3-8B" in out and "fix: --model Qwen/Qwen3-8B" in out
    )
    assert "does not exist" in out and "not usable" in out


def test_a_model_that_never_calls_tools_is_not_usable() -> None:
    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        return 200, completion({"content": "Sure! The text is ready."}, model=body["model"])

    code, out = check(Provider("prose", "", respond, fx.VLLM_MODELS), model="Qwen/Qwen3-8B")
    assert code == 2
    assert "answered without calling the tool: 'Sure! The text is ready.'" in out


def test_an_unreachable_endpoint_fails_fast_through_the_real_entry_point() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "models", "check", "--base-url",
         f"http://127.0.0.1:{port}/v1", "--model", "m"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert f"cannot reach http://127.0.0.1:{port}/v1" in result.stdout
    assert "the base URL usually ends in /v1" in result.stdout


@pytest.mark.parametrize("command", ["solve relu", "bench run"])
def test_an_unknown_tool_format_is_one_line_and_exit_2(command: str, tmp_path: Any) -> None:
    args = [*command.split(), "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    args += ["--tool-format", "xml", "--backend", "cpu", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "--tool-format 'xml': choose from auto, native, hermes, json" in result.output


def test_a_fix_that_ends_in_a_parenthesis_keeps_it() -> None:
    from cuda_agent.agent.server_errors import OLLAMA_TOOLS_FIX

    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        message = f"registry.ollama.ai/library/{body['model']} does not support tools"
        return 400, {"error": {"message": message, "type": "api_error", "param": None}}

    code, out = check(Provider("ollama", "", respond, fx.VLLM_MODELS), model="Qwen/Qwen3-8B")
    assert code == 2
    assert f"fix: {OLLAMA_TOOLS_FIX}\n" in out, out
