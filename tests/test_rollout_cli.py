"""`cuda-agent solve` end to end on the cpu backend, against a real local OpenAI-style server.

The scripted model (the demo's script) reads SKILL.md and model.py, writes a kernel with a
missing semicolon, compiles (error), fixes it, compiles, verifies, profiles and stops. The
evaluations are the harness's own, served to the sandboxed shell through the tool socket.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.agent.replay_server import ReplayServer
from cuda_agent.agent.replays import DEMO_PROBLEM, demo_script
from cuda_agent.agent.trajectory import read_events

pytestmark = pytest.mark.slow


def solve(server: ReplayServer, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CA_TEST_KEY="secret")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent",
            "solve",
            DEMO_PROBLEM,
            "--backend",
            "cpu",
            "--model",
            "replay-model",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "CA_TEST_KEY",
            "--out",
            str(out),
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )


def tool_outputs(events: list[dict]) -> list[str]:
    return [e["message"]["content"] for e in events if e["kind"] == "tool_result"]


def test_solve_writes_fixes_verifies_profiles_and_records_everything(tmp_path: Path) -> None:
    turns = demo_script("cpu")
    with ReplayServer(turns) as server:
        proc = solve(server, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "run"
    printed = json.loads(proc.stdout)
    result = json.loads((out / "result.json").read_text())
    assert printed["reward"] == result["reward"]
    events = read_events(out / "trajectory.jsonl")
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    assistant = [
        e for e in events if e["kind"] == "message" and e["message"]["role"] == "assistant"
    ]
    assert len(assistant) == len(turns) == result["turns"]
    outputs = tool_outputs(events)
    assert len(outputs) == sum(len(t.get("tool_calls", [])) for t in turns)
    compiles = [o for o in outputs if o.startswith("compile:")]
    assert compiles[0].startswith("compile: FAILED") and "error" in compiles[0]
    assert "kernels/bias_gelu_scale.cpp:" in compiles[0]
    assert compiles[1].startswith("compile: ok")
    assert any("correctness: PASS (5/5 trials" in o for o in outputs)
    assert any("median" in o and "samples" in o for o in outputs)  # the profile's timing
    evaluations = [e for e in events if e["kind"] == "evaluation"]
    sources = [e["source"] for e in evaluations]
    assert sources == ["tool compile", "tool compile", "tool verify", "tool profile", "final"]
    final = evaluations[-1]["result"]
    assert final["correct"] and result["final"]["reward"] == final["reward"]
    best_rewards = [
        e["result"]["reward"] for e in evaluations if e["result"] and e["result"]["correct"]
    ]
    assert result["reward"] == max(best_rewards) >= 1
    assert result["exit_reason"] == "submitted"
    assert (out / "best" / "model_new.py").exists()
    assert (out / "best" / "kernels" / "bias_gelu_scale.cpp").exists()
    assert server.requests[0]["model"] == "replay-model"
    assert len(server.requests[0]["tools"]) == 8


def test_an_interrupted_run_resumes_and_a_run_replays(tmp_path: Path) -> None:
    turns = demo_script("cpu")
    out = tmp_path / "run"
    with ReplayServer(turns) as server:
        first = solve(server, out, "--max-turns", "4")
        assert first.returncode == 0, first.stderr[-3000:]
        assert json.loads(first.stdout)["exit_reason"] == "turn_limit"
        resumed = solve(server, out, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    result = json.loads(resumed.stdout)
    assert result["exit_reason"] == "submitted" and result["turns"] == len(turns)
    assert result["final"]["correct"]
    events = read_events(out / "trajectory.jsonl")
    assert [e["kind"] for e in events].count("resume") == 1

    replay_out = tmp_path / "replayed"
    replay = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent",
            "solve",
            DEMO_PROBLEM,
            "--backend",
            "cpu",
            "--replay",
            str(out / "trajectory.jsonl"),
            "--max-turns",
            "5",
            "--out",
            str(replay_out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert replay.returncode == 0, replay.stderr[-3000:]
    original = [
        e["message"]
        for e in events
        if e["kind"] == "message" and e["message"]["role"] == "assistant"
    ][:5]
    replayed = [
        e["message"]
        for e in read_events(replay_out / "trajectory.jsonl")
        if e["kind"] == "message" and e["message"]["role"] == "assistant"
    ]
    assert [m["tool_calls"] for m in replayed] == [m["tool_calls"] for m in original]


def test_solve_needs_a_model_or_a_replay(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "solve", "relu", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "--model and --base-url" in proc.stderr
