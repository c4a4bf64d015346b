"""``--help`` reads as plain text: no reST double backticks, paragraphs wrapped to the
terminal (not at the docstring's line breaks)."""

from __future__ import annotations

import itertools

import pytest

from tests.helpers import run_cli

WIDTH = 100


def description(command: str) -> list[str]:
    """The lines between the usage line and the first box of ``cuda-agent COMMAND --help``."""
    env = {"COLUMNS": str(WIDTH), "TERM": "dumb", "NO_COLOR": "1"}
    done = run_cli(*command.split(), "--help", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line) + 1
    end = next(i for i, line in enumerate(lines) if line.lstrip().startswith("╭"))
    return [line.rstrip() for line in lines[start:end]]


@pytest.mark.parametrize(
    "command", ["bench references", "problems lint", "models path", "serve", "bench report"]
)
def test_help_is_plain_text_wrapped_to_the_terminal(command: str) -> None:
    text = description(command)
    assert not any("``" in line for line in text), text
    for line, after in itertools.pairwise(text):
        if line.strip() and after.strip():  # within a paragraph the wrap is the terminal's
            room = WIDTH - 4 - len(line)
            assert len(after.split()[0]) >= room, (line, after)
