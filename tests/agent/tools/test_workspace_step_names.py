"""A model that calls a workspace step by its shell command (``cuda-agent tool compile``) or
by the step's name gets that command run through ``bash``, not an unknown-tool format error
(seen with Qwen2.5-Coder-0.5B: every turn called a tool named ``cuda-agent tool compile``).

Runs the real registry and a real (unconfined) persistent shell in a fresh C++ workspace.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.agent.shell import PersistentShell
from cuda_agent.agent.tools.base import ToolContext, workspace_step_command
from cuda_agent.agent.tools.registry import default_tools
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.workspace.init import init_workspace
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("cuda-agent tool compile", "cuda-agent tool compile"),
        ("verify", "cuda-agent tool verify"),
        ("cuda-agent  tool   profile", "cuda-agent tool profile"),
        ("cuda-agent tool rm", None),
        ("bash", None),
        ("compile everything", None),
    ],
)
def test_a_workspace_step_is_known_by_its_command_and_its_name(
    name: str, command: str | None
) -> None:
    assert workspace_step_command(name) == command


def test_a_step_called_as_a_tool_runs_through_bash(tmp_path: Path) -> None:
    work = tmp_path / "work"
    init_workspace(resolve_problem("relu", "small"), work, "cpu", "relu")
    sandbox = Sandbox(SandboxPolicy(workdir=work, tmpdir=tmp_path / "tmp"), use_bwrap=False)
    shell = PersistentShell(sandbox)
    try:
        context = ToolContext(workdir=work, shell=shell)
        registry = default_tools()
        outcome = registry.call(context, "cuda-agent tool compile", json.dumps({}))
        assert not outcome.format_error, outcome.text
        assert outcome.text.startswith("(ran 'cuda-agent tool compile' with bash)")
        assert "compile" in outcome.text.splitlines()[1]  # the command's own report
        assert registry.call(context, "cuda-agent tool rm", "{}").format_error
    finally:
        shell.close()
