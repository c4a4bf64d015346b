"""The service's clients: the TRL and verl reward functions (their runnable examples), the
evaluator that RL environments take, and ``bench run --service``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.helpers import TOKENS, Service, relu_text

pytest.importorskip("fastapi")
pytestmark = pytest.mark.slow  # a service process and its workers

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("clients"))
    yield running
    assert running.stop() == 0, running.log.read_text()[-3000:]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
        env={**os.environ, "CUDA_AGENT_TOKEN": TOKENS[0]},
    )


def test_the_trl_reward_example(service: Service) -> None:
    done = _run("examples/service/trl_reward.py", "--url", service.url)
    assert done.returncode == 0, done.stderr[-3000:]
    rewards = json.loads(done.stdout.split("rewards:", 1)[1].strip())
    assert rewards[0] >= 1 and rewards[1:] == [-1.0, -1.0]


def test_the_verl_reward_example(service: Service) -> None:
    done = _run("examples/service/verl_reward.py", "--url", service.url)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "scores: [1.0, -1.0] correct: [1.0, 0.0]" in done.stdout or (
        "correct: [1.0, 0.0]" in done.stdout
    ), done.stdout


def test_an_episode_evaluated_by_the_service(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment RL trains in, with the evaluation section pointing at the service."""
    from cuda_agent.environment import KernelEnvironment
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.rl.verl.evaluation_config import EvaluationSettings

    monkeypatch.setenv("CUDA_AGENT_TOKEN", TOKENS[0])
    settings = EvaluationSettings(backend="cpu", policy="off", baselines=(), pool=service.url)
    options = EvalOptions(backend="cpu", policy="off", baselines=(), trials=1).validate()
    with KernelEnvironment.temporary(
        "relu", "small", tmp_path, evaluator=settings.evaluator(), eval_options=options
    ) as env:
        (env.workdir / "model_new.py").write_text(relu_text())
        score = env.finish()
    assert score.final.correct and score.reward >= 1, score.final.error
    assert score.final.details.seed is None  # it came through the service


def test_bench_run_through_the_service(service: Service, tmp_path: Path) -> None:
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    (solutions / "relu.py").write_text(relu_text())
    (solutions / "row_sum.py").write_text(relu_text())  # wrong for row_sum
    out = tmp_path / "run"
    done = _run(
        "-m", "cuda_agent", "bench", "run", "--problems", "bundled", "--levels", "1",
        "--solutions", str(solutions), "--service", service.url, "--backend", "cpu",
        "--policy", "off", "--baselines", "", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        results[record["problem_id"]] = record["result"]
    assert results["relu"]["correct"] and not results["row_sum"]["correct"]
    assert all("seed" not in r["details"] for r in results.values())
