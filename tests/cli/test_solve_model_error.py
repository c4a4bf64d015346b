"""``solve`` whose model endpoint fails: the cause on stderr in one line, exit 3."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

from cuda_agent.cli.solve_cmd import Retries
from tests.agent.provider_server import Provider, ProviderServer
from tests.helpers import run_cli


def solve(base_url: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = ["solve", "relu", "--backend", "cpu", "--model", "m", "--base-url", base_url]
    return run_cli(*args, "--out", str(out), *extra)


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 3, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_refused_key_is_named_and_exits_3(tmp_path: Path) -> None:
    def respond(body: dict[str, Any], index: int) -> tuple[int, dict[str, Any]]:
        error = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
        return 401, {"error": {**error, "code": "invalid_api_key"}}

    with ProviderServer(Provider("refusing", "", respond)) as server:
        line = error_line(solve(server.base_url, tmp_path / "run"))
    assert "the model endpoint failed:" in line and "Incorrect API key provided" in line
    assert str(tmp_path / "run") in line


def test_an_unreachable_endpoint_is_named_and_exits_3(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the schedule of the defaults (1, 2, 4, 8, 16 s: about 35 s) at a twentieth of the scale
    done = solve(f"http://127.0.0.1:{port}/v1", tmp_path / "run", "--retry-backoff", "0.05")
    line = error_line(done)
    assert "the model endpoint failed: gave up after 6 attempts" in line
    # the wait is never silent: each retry says what failed and when the next attempt comes
    retries = [ln for ln in done.stderr.splitlines() if "retrying in" in ln]
    assert len(retries) == 5, done.stderr
    assert f"127.0.0.1:{port}" in retries[0] and "(attempt 2 of 6)" in retries[0]
    waits = [float(ln.split("retrying in ")[1].split(" s ")[0]) for ln in retries]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8]  # each wait doubles the last


def test_the_retry_defaults_are_five_retries_from_one_second() -> None:
    import typer.main

    from cuda_agent.cli.app import app

    solve_command = typer.main.get_command(app).commands["solve"]  # type: ignore[attr-defined]
    defaults = {param.name: param.default for param in solve_command.params}
    assert (defaults["retries"], defaults["retry_backoff"]) == (5, 1.0)
    assert Retries() == Retries(count=5, backoff_s=1.0)


def test_no_retries_gives_up_after_one_attempt(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = solve(f"http://127.0.0.1:{port}/v1", tmp_path / "run", "--retries", "0")
    assert "gave up after 1 attempts" in error_line(done)
    assert "retrying in" not in done.stderr
