"""``bench run`` refuses what would mislead: a resume under other options, problems or
solutions (the run's fingerprint in ``run.json``), levels that select nothing, a missing
solutions folder; a resume with nothing left to run keeps the run's figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.bench.fingerprint import first_difference
from tests.bench.test_resume_order import CORRECT, PROBLEM


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cuda_agent", "bench", "run", "--backend", "cpu", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def one_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 2, (run.returncode, run.stdout[-2000:], run.stderr[-2000:])
    assert run.stderr.strip().count("\n") == 0 and "Traceback" not in run.stderr, run.stderr
    return run.stderr


def test_the_first_differing_key_is_named() -> None:
    recorded = {"policy": "off", "backend": "cpu"}
    assert first_difference(recorded, {"policy": "off", "backend": "cpu"}) is None
    assert first_difference(recorded, {"policy": "strict", "backend": "cpu"}) == "policy"
    assert first_difference(recorded, {"policy": "off"}) == "backend"


def test_levels_that_select_no_problem_are_refused(tmp_path: Path) -> None:
    run = bench("--levels", "9", "--solutions", str(tmp_path), "--out", str(tmp_path / "r"))
    assert "--levels 9" in one_line(run) and "levels: 1, 2, 3" in run.stderr
    assert not (tmp_path / "r").exists()


def test_a_missing_solutions_folder_is_refused(tmp_path: Path) -> None:
    run = bench("--solutions", "/nonexistent", "--out", str(tmp_path / "r"))
    assert "--solutions /nonexistent: no such folder" in one_line(run)
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_resume_under_other_options_or_solutions_is_refused(tmp_path: Path) -> None:
    problems, solutions, out = tmp_path / "problems", tmp_path / "solutions", tmp_path / "run"
    problems.mkdir()
    solutions.mkdir()
    (problems / "p.py").write_text(PROBLEM)
    (solutions / "p.py").write_text(CORRECT)
    other = tmp_path / "other"
    other.mkdir()
    common = ["--problems", str(problems), "--baselines", "", "--no-memory-check"]
    common += ["--spare-workers", "1", "--out", str(out)]

    first = bench(*common, "--policy", "off", "--solutions", str(solutions))
    assert first.returncode == 0, first.stderr[-3000:]
    figures = json.loads((out / "run.json").read_text())["utilization"]
    assert figures["device_work_s"] > 0

    refused = one_line(bench(*common, "--policy", "strict", "--solutions", str(solutions)))
    assert "--policy 'off'" in refused and "--policy 'strict'" in refused
    assert "--fresh" in refused and "new --out" in refused
    refused = one_line(bench(*common, "--policy", "off", "--solutions", str(other)))
    assert "--solutions" in refused and str(other) in refused

    again = bench(*common, "--policy", "off", "--solutions", str(solutions))
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["utilization"] == figures  # not zeros

    fresh = bench(*common, "--policy", "kernelbench", "--solutions", str(solutions), "--fresh")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert info["policy"] == "kernelbench" and info["fingerprint"]["policy"] == "kernelbench"
    assert len((out / "results.jsonl").read_text().splitlines()) == 1


def test_an_agent_run_is_told_apart_by_its_model_and_limits_not_its_url() -> None:
    from cuda_agent.cli.bench_cmd import agent_source

    source = agent_source("m", "auto", 200, 16384, 131072)
    assert "base_url" not in source and source["mode"] == "agent"
    assert first_difference(source, agent_source("m", "auto", 150, 16384, 131072)) == "max_turns"
    assert first_difference(source, agent_source("m2", "auto", 200, 16384, 131072)) == "model"
