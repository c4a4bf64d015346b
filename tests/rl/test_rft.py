"""Rejection fine-tuning data: each rule rejects a planted trajectory; a solved episode is kept.

The planted trajectories are real ones too: the agent loop driven by a scripted model over a
scratch folder (no evaluation needed). The accepted one is a bench run in agent mode on the cpu
backend: the demo's replayed session writes, fixes, verifies and profiles a kernel, and the
harness evaluates it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.agent.loop import AgentLimits, run_loop
from cuda_agent.agent.models import ScriptedModel
from cuda_agent.agent.replays import DEMO_PROBLEM, demo_script
from cuda_agent.agent.tools.base import ToolContext
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.agent.trajectory import Trajectory, load_messages, read_events
from cuda_agent.bench.records import AttemptRecord, append_record, read_records
from cuda_agent.bench.run import AgentSpec, run_agent
from cuda_agent.cluster.local import LocalPool
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.rft import RFT_FILE, STATS_FILE, RFTRules, build_rft_dataset, judge_trajectory
from tests.helpers import fast_options, verdict


def read(path: str) -> dict[str, Any]:
    return {"name": "read_file", "arguments": {"path": path}}


DONE = {"content": "done"}


def loop_events(tmp_path: Path, turns: list[dict[str, Any]], **limits: Any) -> list[dict]:
    """A real trajectory of the agent loop, the scripted model's turns over a scratch folder."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    for name in ("a.txt", "b.txt", "c.txt"):
        (work / name).write_text(f"{name}\n")
    path = tmp_path / f"loop-{len(list(tmp_path.glob('loop-*')))}.jsonl"
    trajectory = Trajectory(path)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    for message in messages:
        trajectory.event("message", message=message)
    run_loop(
        ScriptedModel(turns),
        default_tools(),
        ToolContext(workdir=work),
        messages,
        AgentLimits(**limits),
        trajectory,
    )
    trajectory.close()
    return read_events(path)


def test_a_clean_loop_is_kept_and_the_reward_rule_rejects_a_failure(tmp_path: Path) -> None:
    events = loop_events(tmp_path, [{"tool_calls": [read("a.txt")]}, DONE])
    kept = judge_trajectory(events, 1.0, RFTRules())
    assert (kept.kept, kept.reasons, kept.turns, kept.tool_calls) == (True, [], 2, 1)
    assert judge_trajectory(events, -1.0, RFTRules()).reasons == ["reward<=0"]
    assert judge_trajectory(events, None, RFTRules()).reasons == ["reward<=0"]
    assert judge_trajectory(events, 1.0, RFTRules(min_reward=1.0)).reasons == ["reward<=1"]
    assert judge_trajectory(events, 2.0, RFTRules(min_reward=1.0)).kept


def test_the_exit_must_be_the_models_own_stop(tmp_path: Path) -> None:
    reads = [{"tool_calls": [read(n)]} for n in ("a.txt", "b.txt", "c.txt", "a.txt")]
    events = loop_events(tmp_path, reads, max_turns=3)
    assert judge_trajectory(events, 1.0, RFTRules()).reasons == ["exit:turn_limit"]
    assert judge_trajectory(events, 1.0, RFTRules(require_submitted=False)).kept
    no_exit = [e for e in events if e["kind"] != "exit"]
    assert judge_trajectory(no_exit, 1.0, RFTRules()).reasons == ["exit:missing"]


def test_malformed_tool_calls_are_counted(tmp_path: Path) -> None:
    unknown = {"name": "no_such_tool", "arguments": {}}
    bad_json = {"name": "read_file", "arguments": '{"path": "a.txt"'}
    missing = {"name": "read_file", "arguments": {}}
    events = loop_events(
        tmp_path,
        [{"tool_calls": [unknown]}, {"tool_calls": [bad_json, read("a.txt"), missing]}, DONE],
    )
    tool_errors = [e["message"]["content"] for e in events if e["kind"] == "tool_result"]
    assert "unknown tool" in tool_errors[0] and "not valid JSON" in tool_errors[1]
    assert judge_trajectory(events, 1.0, RFTRules()).reasons == ["malformed_tool_calls:3"]
    assert judge_trajectory(events, 1.0, RFTRules(max_malformed_calls=3)).kept

    looped = loop_events(tmp_path, [{"tool_calls": [unknown]}] * 5, max_format_errors=3)
    assert judge_trajectory(looped, 1.0, RFTRules()).reasons == [
        "exit:format_errors",
        "malformed_tool_calls:3",
        "repeated_call:no_such_tool x3",
    ]


def test_a_call_repeated_in_a_row_is_a_loop(tmp_path: Path) -> None:
    two = loop_events(tmp_path, [{"tool_calls": [read("a.txt")]}] * 2 + [DONE])
    assert judge_trajectory(two, 1.0, RFTRules()).kept
    # three in a row, across two turns; the same arguments in another key order count too
    reordered = {"name": "read_file", "arguments": '{"offset": 1, "path": "a.txt"}'}
    same = {"name": "read_file", "arguments": '{"path": "a.txt", "offset": 1}'}
    events = loop_events(
        tmp_path, [{"tool_calls": [read("b.txt"), reordered, same]}, {"tool_calls": [same]}, DONE]
    )
    verdict = judge_trajectory(events, 1.0, RFTRules())
    assert (verdict.reasons, verdict.tool_calls) == (["repeated_call:read_file x3"], 4)
    assert judge_trajectory(events, 1.0, RFTRules(max_repeated_calls=3)).kept


def test_the_same_call_too_often_anywhere_is_a_loop(tmp_path: Path) -> None:
    turns = [{"tool_calls": [read("a.txt"), read("b.txt")]}] * 5 + [DONE]
    events = loop_events(tmp_path, turns)
    assert judge_trajectory(events, 1.0, RFTRules()).reasons == ["identical_call:read_file x5"]
    assert judge_trajectory(events, 1.0, RFTRules(max_identical_calls=5)).kept


def test_tool_error_ratio_is_optional(tmp_path: Path) -> None:
    events = loop_events(
        tmp_path, [{"tool_calls": [read("missing.txt")]}, {"tool_calls": [read("a.txt")]}, DONE]
    )
    assert [e["is_error"] for e in events if e["kind"] == "tool_result"] == [True, False]
    assert judge_trajectory(events, 1.0, RFTRules()).kept
    assert judge_trajectory(events, 1.0, RFTRules(max_tool_errors_ratio=0.5)).kept
    strict = RFTRules(max_tool_errors_ratio=0.25)
    assert judge_trajectory(events, 1.0, strict).reasons == ["tool_errors:1/2"]


def test_no_events_is_no_trajectory() -> None:
    assert judge_trajectory([], 3.0, RFTRules()).reasons == ["no_trajectory"]


# --- a real agent-mode bench run ------------------------------------------------------------


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rft") / "run"
    spec = AgentSpec(make_model=lambda: ScriptedModel(demo_script("cpu"), name="replay-demo"))
    problem = resolve_problem(DEMO_PROBLEM, "small")
    with LocalPool("cpu") as pool:
        records = run_agent([problem], spec, pool, fast_options(), out)
    assert len(records) == 1 and records[0].correct and records[0].result.reward >= 1
    return out


@pytest.mark.slow
def test_a_solved_episode_is_kept_with_its_whole_transcript(bench_run: Path) -> None:
    (record,) = read_records(bench_run)
    assert record.trajectory is not None
    events = read_events(bench_run / record.trajectory)
    script = demo_script("cpu")
    verdict = judge_trajectory(events, record.result.reward, RFTRules())
    assert verdict.kept, verdict.reasons
    assert verdict.turns == len(script)
    assert verdict.tool_calls == sum(len(t.get("tool_calls", [])) for t in script)

    messages = load_messages(events)
    assert [m["role"] for m in messages[:2]] == ["system", "user"]
    expected_roles = ["system", "user"]
    for turn in script:
        expected_roles += ["assistant"] + ["tool"] * len(turn.get("tool_calls", []))
    assert [m["role"] for m in messages] == expected_roles
    i = 2
    for turn in script:  # each assistant turn is followed by its tool results, in call order
        assistant = messages[i]
        calls = assistant.get("tool_calls", [])
        assert [c["function"]["name"] for c in calls] == [
            c["name"] for c in turn.get("tool_calls", [])
        ]
        assert [json.loads(c["function"]["arguments"]) for c in calls] == [
            c["arguments"] for c in turn.get("tool_calls", [])
        ]
        results = messages[i + 1 : i + 1 + len(calls)]
        assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]
        i += 1 + len(calls)
    text = str(messages)  # the slip, its fix and the verdicts stay in the transcript
    assert "compile: FAILED" in text and "compile: ok" in text and "correctness: PASS" in text
    assert messages[-1]["role"] == "assistant" and "tool_calls" not in messages[-1]


@pytest.mark.slow
def test_build_rft_dataset_over_a_run_folder(bench_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(bench_run, run)
    (real,) = read_records(run)
    assert real.trajectory is not None
    real_text = (run / real.trajectory).read_text()
    level = real.level

    def plant(attempt: int, result: dict[str, Any], trajectory: str | None) -> None:
        append_record(
            run,
            AttemptRecord(
                DEMO_PROBLEM, level, attempt, "agent", verdict(**result), trajectory=trajectory
            ),
        )

    solved = {"correct": True, "reward": 1.0}
    # 1: a torn last line after the real episode's events (a crash mid-write): still kept
    torn = run / "episodes" / "torn" / "trajectory.jsonl"
    torn.parent.mkdir(parents=True)
    torn.write_text(real_text + '{"t": 1.0, "kind": "mess')
    plant(1, solved, "episodes/torn/trajectory.jsonl")
    # 2: the real episode judged with a failed evaluation
    plant(2, {"correct": False, "reward": -1.0}, real.trajectory)
    # 3: a loop that hit the turn limit
    looped = loop_events(tmp_path, [{"tool_calls": [read("a.txt")]}] * 6, max_turns=4)
    loop_file = run / "episodes" / "loop" / "trajectory.jsonl"
    loop_file.parent.mkdir(parents=True)
    loop_file.write_text("".join(json.dumps(e) + "\n" for e in looped))
    plant(3, solved, "episodes/loop/trajectory.jsonl")
    # 4, 5, 6: a missing file, no trajectory recorded, a file whose only line is torn
    plant(4, solved, "episodes/gone/trajectory.jsonl")
    plant(5, solved, None)
    only_torn = run / "episodes" / "only-torn" / "trajectory.jsonl"
    only_torn.parent.mkdir(parents=True)
    only_torn.write_text('{"t": 1.0, "kind": "sta')
    plant(6, solved, "episodes/only-torn/trajectory.jsonl")

    out = tmp_path / "rft"
    stats = build_rft_dataset([run], out, RFTRules())
    assert stats == json.loads((out / STATS_FILE).read_text())
    assert (stats["total"], stats["kept"], stats["rejected"]) == (7, 2, 5)
    assert stats["reasons"] == {
        "no_trajectory": 3,
        "reward<=0": 1,
        "exit:turn_limit": 1,
        "repeated_call:read_file x4": 1,
    }
    assert stats["reason_kinds"]["repeated_call"] == 1
    assert stats["rules"]["max_repeated_calls"] == 2

    rows = [json.loads(line) for line in (out / RFT_FILE).read_text().splitlines()]
    assert len(rows) == stats["kept"]
    assert [(r["problem_id"], r["attempt"]) for r in rows] == [(DEMO_PROBLEM, 0), (DEMO_PROBLEM, 1)]
    transcript = load_messages(read_events(run / real.trajectory))
    assert all(r["messages"] == transcript for r in rows)
    assert rows[0]["reward"] == real.result.reward and rows[1]["reward"] == 1.0
    assert "tools" not in rows[0]  # the start event does not record the tool schemas
    assert rows[0]["trajectory"] == real.trajectory and rows[0]["run"] == str(run)

    # with the tool schemas in the start event, the rows carry them
    schemas = default_tools().schemas()
    events = read_events(run / real.trajectory)
    events[0]["tools"] = schemas
    (run / real.trajectory).write_text("".join(json.dumps(e) + "\n" for e in events))
    build_rft_dataset([run], out, RFTRules())
    first = json.loads((out / RFT_FILE).read_text().splitlines()[0])
    assert first["tools"] == schemas


@pytest.mark.slow  # the bench_run fixture: a whole agent episode
def test_train_rft_builds_the_set_before_needing_verl(bench_run: Path, tmp_path: Path) -> None:
    import importlib.util

    from tests.cli.test_cli import cli

    out = tmp_path / "rft-set"
    result = cli("train", "rft", f"runs=[{bench_run}]", f"out={out}")
    assert (out / "rft.jsonl").read_text().count("\n") == 1  # the demo episode is kept
    if importlib.util.find_spec("verl") is None:
        assert (
            result.returncode == 2 and "verl" in result.stderr and "Traceback" not in result.stderr
        )
