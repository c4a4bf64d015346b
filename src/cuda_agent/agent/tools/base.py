"""Tool plumbing: the shared context of an episode, results, path checks, the registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.agent.shell import PersistentShell


class ToolError(Exception):
    """A tool call that cannot be carried out; the message goes back to the model."""


@dataclass
class ToolContext:
    """State shared by the tools of one episode."""

    workdir: Path
    shell: PersistentShell | None = None
    read_files: set[Path] = field(default_factory=set)
    todos: list[dict[str, str]] = field(default_factory=list)
    default_timeout_s: float = 600.0
    max_timeout_s: float = 1800.0

    def resolve(self, raw: str, must_exist: bool = False) -> Path:
        """A path inside the workdir (relative paths are relative to it), else ToolError."""
        if not isinstance(raw, str) or not raw.strip():
            raise ToolError("path must be a non-empty string")
        candidate = Path(raw)
        path = (candidate if candidate.is_absolute() else self.workdir / candidate).resolve()
        root = self.workdir.resolve()
        if path != root and root not in path.parents:
            raise ToolError(f"{raw}: outside the workdir ({root}); only files in it can be used")
        if must_exist and not path.exists():
            raise ToolError(f"{raw}: no such file")
        return path

    def relative(self, path: Path) -> str:
        return path.relative_to(self.workdir.resolve()).as_posix() or "."


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[ToolContext, dict[str, Any]], str]

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass
class ToolOutcome:
    text: str
    is_error: bool = False
    format_error: bool = False  # the call itself was malformed (unknown tool, bad arguments)


# The workspace's steps, shell commands the prompt names (``cuda-agent tool compile``...).
WORKSPACE_STEPS = ("compile", "verify", "profile")


def workspace_step_command(name: str) -> str | None:
    """The shell command a tool name means when a model calls a workspace step by its command
    (``cuda-agent tool verify``) or by the step's name (``verify``), else None."""
    words = name.split()
    if words[:2] == ["cuda-agent", "tool"]:
        words = words[2:]
    if len(words) == 1 and words[0] in WORKSPACE_STEPS:
        return f"cuda-agent tool {words[0]}"
    return None


class ToolRegistry:
    """The tools of an episode by name. A call of an unknown name that is a workspace step's
    command (or the step's name) runs that command through ``bash``: small models take the
    prompt's shell commands for tool names, and the command is what they mean."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self.tools.values()]

    def call(self, context: ToolContext, name: str, raw_arguments: str) -> ToolOutcome:
        tool = self.tools.get(name)
        step = workspace_step_command(name) if tool is None else None
        if step is not None and "bash" in self.tools:
            outcome = self.call(context, "bash", json.dumps({"command": step}))
            outcome.text = f"(ran {step!r} with bash)\n{outcome.text}"
            return outcome
        if tool is None:
            known = ", ".join(sorted(self.tools))
            return ToolOutcome(f"error: unknown tool {name!r} (tools: {known})", True, True)
        try:
            arguments = json.loads(raw_arguments or "{}")
        except json.JSONDecodeError as err:
            return ToolOutcome(
                f"error: arguments are not valid JSON ({err.msg} at {err.pos})", True, True
            )
        if not isinstance(arguments, dict):
            return ToolOutcome("error: arguments must be a JSON object", True, True)
        missing = [k for k in tool.parameters.get("required", []) if k not in arguments]
        if missing:
            return ToolOutcome(f"error: missing argument(s): {', '.join(missing)}", True, True)
        try:
            return ToolOutcome(tool.run(context, arguments))
        except ToolError as err:
            return ToolOutcome(f"error: {err}", True)


def string_param(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


def object_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
