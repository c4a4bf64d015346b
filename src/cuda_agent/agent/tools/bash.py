"""The ``bash`` tool: one command in the episode's persistent, sandboxed shell."""

from __future__ import annotations

from typing import Any

from cuda_agent.agent.tools.base import Tool, ToolContext, ToolError, object_schema, string_param


def run_bash(ctx: ToolContext, args: dict[str, Any]) -> str:
    if ctx.shell is None:
        raise ToolError("no shell in this session")
    command = args["command"]
    if not isinstance(command, str) or not command.strip():
        raise ToolError("command must be a non-empty string")
    timeout = float(args.get("timeout_s") or ctx.default_timeout_s)
    timeout = max(1.0, min(timeout, ctx.max_timeout_s))
    result = ctx.shell.run(command, timeout)
    before, after = [], []
    if result.restarted:
        before.append("[note: the previous shell was lost; this is a fresh one in the workdir]")
    if result.timed_out:
        after.append(f"[killed after {timeout:.0f} s; the shell was restarted]")
    elif result.exit_code not in (0, None):
        after.append(f"[exit code {result.exit_code}]")
    body = result.output if result.output.strip() else "(no output)"
    return "\n".join([*before, body, *after])


BASH_TOOL = Tool(
    "bash",
    "Run a shell command in the workdir (a persistent bash session: cd and exports carry over; "
    "sandboxed: no network, writes only in the workdir and /tmp). Use it for "
    "`cuda-agent tool compile`, `cuda-agent tool verify` and `cuda-agent tool profile`.",
    object_schema(
        {
            "command": string_param("The command line."),
            "timeout_s": {"type": "number", "description": "Seconds (default 600)."},
        },
        ["command"],
    ),
    run_bash,
)
