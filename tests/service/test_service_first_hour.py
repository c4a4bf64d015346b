"""The service's front door: a busy port is one line and exit 2; a token is checked before
the body (a malformed body with a wrong token is 401, not 422)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.helpers import TOKENS, Service, body

pytest.importorskip("fastapi")


def test_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as holder:  # another process's listener, as far as serve can tell
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        args = ["serve", "--http", f"127.0.0.1:{port}", "--backend", "cpu"]
        done = subprocess.run(
            [sys.executable, "-m", "cuda_agent", *args, "--db", str(tmp_path / "db")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "CUDA_AGENT_DEBUG": ""},
        )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--http 127.0.0.1:{port}: cannot listen there" in lines[0]
    assert "internal error" not in done.stderr


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("service"))
    yield running
    assert running.stop() == 0, running.log.read_text()[-3000:]


@pytest.mark.slow  # a service process
def test_the_token_is_checked_before_the_body(service: Service) -> None:
    bad_bodies: list[dict[str, object]] = [
        {"content": b"{not json", "headers": {"content-type": "application/json"}},
        {"json": body(surprise=1)},
        {"json": {"problem": 3}},
    ]
    for token in (None, "wrong-token-wrong-token"):
        with service.client(token) as http:
            for request in bad_bodies:
                answer = http.post("/v1/jobs", **request)  # type: ignore[arg-type]
                assert answer.status_code == 401, (token, request, answer.text)
                assert answer.headers["www-authenticate"] == "Bearer"
            assert http.post("/v1/batches", json={"jobs": 7}).status_code == 401
            assert http.get("/v1/jobs/x", params={"wait": "soon"}).status_code == 401
            assert http.get("/v1/health").status_code == 200  # public
    with service.client(TOKENS[0]) as http:  # with a valid token the body is judged
        assert http.post("/v1/jobs", **bad_bodies[0]).status_code == 422  # type: ignore[arg-type]
        assert http.post("/v1/jobs", json=body(surprise=1)).status_code == 422
