"""Options that contradict each other are refused in one line, exit 2, before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cuda_agent.examples import examples_root


def test_service_url_and_no_service_are_refused() -> None:
    solution = str(examples_root() / "relu" / "cpu.py")
    args = ["eval", "relu", solution, "--backend", "cpu"]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cuda_agent",
            *args,
            "--service",
            "http://127.0.0.1:9",
            "--no-service",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 2, (done.stdout[-2000:], done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--service http://127.0.0.1:9 and --no-service" in lines[0]
    assert done.stdout == ""


def test_an_endpoint_that_is_not_a_url_is_refused_in_one_line(tmp_path: Path) -> None:
    for args in (
        ["models", "check", "--base-url", "URL", "--model", "NAME"],
        [
            "solve",
            "relu",
            "--model",
            "NAME",
            "--base-url",
            "localhost:8000",
            "--out",
            str(tmp_path / "run"),
        ],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "cuda_agent", *args],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 2, (args, done.stdout[-2000:], done.stderr[-2000:])
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "not an http(s) URL" in lines[0], done.stderr
