"""A command line the parser cannot take (an option value of the wrong type, an unknown
option, a missing argument) is refused like every other unusable input: one ``error:`` line on
stderr naming what is wrong and where the help is, exit status 2, nothing on stdout. (Click's
own display was a box of six lines.) The bare command still prints its help."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.examples import examples_root
from tests.helpers import assert_one_line_exit_2, run_cli

SOLUTION = str(examples_root() / "relu" / "cpu.py")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["eval", "relu", SOLUTION, "--seed", "abc"], "Invalid value for '--seed'"),
        (["bench", "run", "--jobs-per-gpu", "x"], "Invalid value for '--jobs-per-gpu'"),
        (["eval", "relu"], "Missing argument 'solution'"),
        (["eval", "relu", SOLUTION, "--no-such-option"], "No such option: --no-such-option"),
        (["no-such-command"], "No such command"),
    ],
)
def test_a_command_line_the_parser_refuses_is_one_error_line(args: list[str], needle: str) -> None:
    done = run_cli(*args)
    assert_one_line_exit_2(done, needle)
    assert done.stderr.startswith("error: ") and "--help" in done.stderr
    assert done.stdout == ""


def test_the_bare_command_prints_its_help() -> None:
    done = run_cli()
    assert done.returncode == 2 and "Usage:" in done.stdout + done.stderr
    assert "error:" not in done.stderr


def test_a_report_of_a_missing_folder_says_the_folder_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no-run-here"
    assert_one_line_exit_2(run_cli("bench", "report", str(missing)), "no such run folder")
    tmp_path.joinpath("empty").mkdir()
    assert_one_line_exit_2(
        run_cli("bench", "report", str(tmp_path / "empty")), "no results in this folder"
    )


def test_help_shows_no_type_beside_a_flag() -> None:
    """A flag takes no value: its row has no ``<bool>``; an option with one keeps its type."""
    for args in (["--help"], ["eval", "--help"], ["bench", "run", "--help"]):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
        assert "<bool>" not in done.stdout, args
    assert "<int>" in run_cli("eval", "--help").stdout


def test_a_suggested_command_is_one_line_when_output_is_not_a_terminal(tmp_path: Path) -> None:
    """``bench run``'s last line names the report command; rich broke it at 80 columns when
    stdout was a pipe, so a copied command broke in two."""
    out = tmp_path / ("a-folder-name-long-enough-to-pass-eighty-columns-" * 2) / "run"
    solutions = tmp_path / "no-solutions"
    solutions.mkdir()
    done = run_cli(
        "bench", "run", "--problems", "bundled", "--solutions", str(solutions),
        "--backend", "cpu", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"report: cuda-agent bench report {out}" in done.stdout.splitlines()[-1]


def test_a_solutions_syntax_error_names_its_line_and_column(tmp_path: Path) -> None:
    """``eval`` of a solution that does not parse: the verdict's message says file:line:column,
    as a problem's syntax error does (issue 50: a solution's had no column)."""
    import json

    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n"
        "        return x\n"
    )
    done = run_cli("eval", "relu", str(bad), "--backend", "cpu", "--json")
    assert done.returncode == 0, done.stderr  # an evaluation was produced: the verdict
    error = json.loads(done.stdout)["error"]
    assert error == {"stage": "static", "message": "bad.py:3:25: syntax error: expected ':'"}
