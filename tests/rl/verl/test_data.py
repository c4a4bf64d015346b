"""Problem sets as verl dataset rows: written, read back, and resolved by our verl adapters."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import load_problem_set, resolve_problem
from cuda_agent.rl.reply import extract_solution
from cuda_agent.rl.verl import compat
from cuda_agent.rl.verl.data import verl_rows, write_verl_dataset
from cuda_agent.rl.verl.reward import compute_score
from tests.cli.test_cli import cli


def test_rows_round_trip_and_name_their_problems(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    count = write_verl_dataset("bundled", out, agentic=True, backend="cpu", size="small")
    bundled = load_problem_set("bundled", size="small")
    assert count == len(bundled) and not list(tmp_path.glob("*.partial"))
    rows = pq.read_table(out).to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(bundled)))
    for row, problem in zip(rows, bundled, strict=True):
        assert row["agent_name"] == compat.AGENT_LOOP_NAME
        assert row["data_source"] == "cuda_agent"
        assert [m["role"] for m in row["prompt"]] == ["system"]
        spec = row["reward_model"]["ground_truth"]
        assert spec == row["extra_info"]["problem"]
        again = resolve_problem(spec, row["extra_info"]["size"])
        assert again.id == problem.id and again.source == problem.source


@pytest.mark.slow  # an evaluation
def test_single_turn_row_and_a_reply_scored_by_the_evaluator() -> None:
    (problem,) = [p for p in load_problem_set("bundled", size="small") if p.id == "relu"]
    (row,) = verl_rows([problem], agentic=False, backend="cpu")
    assert "agent_name" not in row
    system, user = row["prompt"]
    assert "class ModelNew" in system["content"] and "C++ kernels" in system["content"]
    assert problem.source.strip() in user["content"]
    solution = (examples_root() / "relu" / "cpu.py").read_text(encoding="utf-8")
    reply = f"Here is the kernel.\n\n```python\n{solution}```\n"
    assert extract_solution(reply) is not None
    score = compute_score(
        data_source=row["data_source"],
        solution_str=reply,
        ground_truth=row["reward_model"]["ground_truth"],
        extra_info=row["extra_info"],
        backend="cpu",
        baselines=["eager"],
    )
    assert score["correct"] == 1.0 and score["score"] >= 1.0


def test_ppo_stages_train_on_the_written_dataset(tmp_path: Path) -> None:
    for stage, agentic in (("single-turn", False), ("agentic-ppo", True)):
        result = cli(
            "train", stage, "--dry-run", "--json", f"trainer.save_dir={tmp_path}",
            "data.train=bundled",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        plan = json.loads(result.stdout)
        train_file = str(tmp_path / stage / "train.parquet")
        assert plan["engine_options"]["data.train_files"] == train_file
        assert plan["datasets"][train_file]["problems"] == "bundled"
        assert plan["datasets"][train_file]["agentic"] is agentic
        assert not Path(train_file).exists()  # a dry run writes nothing
