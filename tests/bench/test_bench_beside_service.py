"""``bench run`` and this machine's ``cuda-agent serve``: a run's own workers would share the
device with the service's evaluations, so the run is refused unless ``--no-service`` says to
run beside it, and then ``run.json`` records the service (a real service thread on its own
socket, a real ``bench run`` subprocess on the cpu backend)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.evaluator.service import SOCKET_ENV
from tests.bench.test_resume_order import CORRECT, PROBLEM
from tests.helpers import assert_one_line_exit_2, cpu_service_thread, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture
def socket_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A cpu service serving on its own socket; the environment that points a command at it."""
    env = {SOCKET_ENV: str(tmp_path / "eval.sock")}
    monkeypatch.setenv(SOCKET_ENV, env[SOCKET_ENV])
    with cpu_service_thread(tmp_path / "eval.sock", spare_depth=0):
        yield env


def test_a_run_beside_this_machines_service_needs_no_service(
    socket_env: dict[str, str], tmp_path: Path
) -> None:
    problems, solutions, run = tmp_path / "problems", tmp_path / "solutions", tmp_path / "run"
    problems.mkdir()
    solutions.mkdir()
    (problems / "relu_a.py").write_text(PROBLEM)
    (solutions / "relu_a.py").write_text(CORRECT)
    args = ["bench", "run", "--problems", str(problems), "--solutions", str(solutions)]
    args += ["--backend", "cpu", "--baselines", "", "--policy", "off", "--out", str(run)]

    refused = run_cli(*args, env=socket_env)
    assert_one_line_exit_2(refused, f"`cuda-agent serve` (pid {os.getpid()}) evaluates on cpu")
    assert "--no-service" in refused.stderr and not run.exists()

    beside = run_cli(*args, "--spare-workers", "1", "--no-service", env=socket_env)
    assert beside.returncode == 0, beside.stderr
    assert "running beside this machine's `cuda-agent serve`" in beside.stderr
    info = json.loads((run / "run.json").read_text())
    assert info["beside_service"] == {"pid": os.getpid(), "backend": "cpu"}
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert [r["result"]["correct"] for r in results] == [True]
