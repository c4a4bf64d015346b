"""The local evaluation service: a real server thread, real workers, real socket clients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.evaluator.service import (
    SOCKET_ENV,
    EvalService,
    evaluate_remote,
    service_info,
    socket_path,
)
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import cpu_service_thread, fast_options

pytestmark = pytest.mark.slow


@pytest.fixture
def service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EvalService]:
    """A service on its own socket (the suite's shared cache stays: its builds are warm)."""
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "eval.sock"))
    with cpu_service_thread(tmp_path / "eval.sock") as running:
        yield running


def test_evaluations_go_through_the_service_and_reuse_warm_workers(service: EvalService) -> None:
    info = service_info()
    assert info is not None and info["backend"] == "cpu" and info["pid"] == os.getpid()
    problem = resolve_problem("relu", "small")
    solution = load_solution(examples_root() / "relu" / "cpu.py")
    stages: list[str] = []
    first = evaluate_remote(problem, solution, fast_options(), lambda s, _t: stages.append(s))
    second = evaluate_remote(problem, solution, fast_options())
    assert first is not None and second is not None
    assert first.correct and second.correct, (first.error, second.error)
    assert first.details.service["served"] == 1 and second.details.service["served"] == 2
    assert "verify" in stages and "build" in stages


def test_a_ready_spare_is_reported_and_taken_without_waiting(service: EvalService) -> None:
    """The service says when its spare has finished warming up; an evaluation that comes then
    takes it and waits for no start-up (``worker_start.ready_after_s`` 0.0)."""
    import time

    deadline = time.monotonic() + 180
    info = service_info()
    while info is not None and info["spares_ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        info = service_info()
    assert info is not None and info["spares"] >= 1 and info["spares_ready"] >= 1, info
    problem = resolve_problem("relu", "small")
    solution = load_solution(examples_root() / "relu" / "cpu.py")
    result = evaluate_remote(problem, solution, fast_options())
    assert result is not None and result.correct, result and result.error
    assert result.details.worker_start == {"source": "spare", "ready_after_s": 0.0}


def test_a_fresh_worker_reports_its_start_up(tmp_path: Path) -> None:
    """Without spares, the worker's own start-up is part of its seconds, and reported."""
    from cuda_agent.evaluator.pipeline import evaluate

    problem = resolve_problem("relu", "small")
    solution = load_solution(examples_root() / "relu" / "cpu.py")
    result = evaluate(problem, solution, fast_options(keep_spare_worker=False))
    assert result.correct, result.error
    start = result.details.worker_start
    assert start["source"] == "fresh"
    assert 0.0 < start["ready_after_s"] < result.details.timings_s["worker"], start


def test_a_client_without_the_key_is_refused(service: EvalService) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(socket_path()))
        sock.sendall(json.dumps({"token": "guess", "op": "info"}).encode() + b"\n")
        reply = json.loads(sock.makefile("rb").readline())
    assert reply == {"type": "error", "message": "not authorised"}


def test_no_service_means_local_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SOCKET_ENV, str(tmp_path / "nobody.sock"))
    assert service_info() is None
    problem = resolve_problem("relu", "small")
    solution = load_solution(examples_root() / "relu" / "cpu.py")
    assert evaluate_remote(problem, solution, fast_options()) is None


def test_the_eval_command_uses_a_running_service(service: EvalService) -> None:
    solution = examples_root() / "relu" / "cpu.py"
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "cuda_agent", "eval", "relu", str(solution), "--json"),
            *("--baselines", "eager", "--trials", "2"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["correct"] and result["backend"] == "cpu"
    assert result["details"]["service"]["pid"] == os.getpid()


def test_the_serve_command_stops_on_sigterm(tmp_path: Path) -> None:
    """``cuda-agent serve`` in its own process ends promptly on SIGTERM (the handler once called
    ``shutdown()`` from the thread inside ``serve_forever()``, which waits for itself)."""
    import signal
    import time

    env = {**os.environ, SOCKET_ENV: str(tmp_path / "serve.sock")}
    server = subprocess.Popen(
        [sys.executable, "-m", "cuda_agent", "serve", "--backend", "cpu"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while service_info(tmp_path / "serve.sock") is None:
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "the service never answered"
            time.sleep(0.1)
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, stderr
    assert "evaluation service stopped" in stderr
