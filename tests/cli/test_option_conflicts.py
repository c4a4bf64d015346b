"""Options that contradict each other are refused in one line, exit 2, before any work."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.examples import examples_root
from tests.helpers import assert_one_line_exit_2, run_cli


def test_service_url_and_no_service_are_refused(tmp_path: Path) -> None:
    solution = str(examples_root() / "relu" / "cpu.py")
    for args in (
        ["eval", "relu", solution, "--backend", "cpu"],
        ["bench", "run", "--solutions", str(tmp_path), "--out", str(tmp_path / "run")],
    ):
        done = run_cli(*args, "--service", "http://127.0.0.1:9", "--no-service")
        assert_one_line_exit_2(done, "--service http://127.0.0.1:9 and --no-service")
        assert done.stdout == ""
    assert not (tmp_path / "run").exists()


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
        assert_one_line_exit_2(run_cli(*args), "not an http(s) URL")
