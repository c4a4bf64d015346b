"""``solve`` whose model endpoint fails: the cause on stderr in one line, exit 3."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent.provider_server import Provider, ProviderServer
from tests.helpers import run_cli


def solve(base_url: str, out: Path) -> subprocess.CompletedProcess[str]:
    args = ["solve", "relu", "--backend", "cpu", "--model", "m", "--base-url", base_url]
    return run_cli(*args, "--out", str(out))


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


@pytest.mark.slow  # the client retries an unreachable endpoint with backoff (about 40 s)
def test_an_unreachable_endpoint_is_named_and_exits_3(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = solve(f"http://127.0.0.1:{port}/v1", tmp_path / "run")
    line = error_line(done)
    assert "the model endpoint failed: gave up after 6 attempts" in line
    # the wait is never silent: each retry says what failed and when the next attempt comes
    retries = [ln for ln in done.stderr.splitlines() if "retrying in" in ln]
    assert len(retries) == 5, done.stderr
    assert f"127.0.0.1:{port}" in retries[0] and "(attempt 2 of 6)" in retries[0]
