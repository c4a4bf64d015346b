"""Readable summary of an episode: the tool calls turn by turn, then the harness's verdicts.

A tool's telling output lines (the verdict, the runtime with both baselines) are shown whole,
each on its own row, and wrap with the panel at word boundaries; other text is shortened at
a word boundary, never mid-word."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from cuda_agent.agent.trajectory import read_events
from cuda_agent.evaluator.workspace_commands import fmt_us, fmt_x
from cuda_agent.rollout import EpisodeResult


def render_episode(
    console: Console, trajectory: Path, episode: EpisodeResult, kept: bool = True
) -> None:
    """What the agent did, then the result; ``kept=False``: the run folder is removed after."""
    lines = []
    pending: dict[str, str] = {}
    for event in read_events(trajectory):
        message = event.get("message") or {}
        if event.get("kind") == "message" and message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                pending[call["id"]] = describe_call(call["function"])
            if not message.get("tool_calls"):
                reply = _shorten(str(message.get("content")), 200)
                lines.append(f"[bold]final reply[/]: {escape(reply)}")
        elif event.get("kind") == "tool_result":
            mark = "[red]x[/]" if event.get("is_error") else "[green]>[/]"
            label = escape(pending.get(str(message.get("tool_call_id")), "?"))
            lines.append(f"{mark} {label}")
            # each telling line whole, on its own row: the panel wraps it at word boundaries
            lines += [f"    [dim]{escape(g)}[/]" for g in _gist(message.get("content") or "")]
    console.print(Panel("\n".join(lines) or "(no steps)", title="what the agent did", expand=False))
    final, best = episode.final, episode.best
    counted = "final" if best is None or final.reward >= best.reward else "best verified"
    summary = [
        f"exit: {episode.exit_reason} after {episode.turns} turns, "
        f"{episode.context_tokens} tokens in context; sandbox: {episode.sandbox}",
        f"final (the harness's evaluation of the workdir as the agent left it): "
        f"{'correct' if final.correct else 'not correct'}, reward {final.reward:g}, "
        f"runtime {fmt_us(final.runtime_us)}, x eager {fmt_x(final.speedup_eager)}, "
        f"x compile {fmt_x(final.speedup_compile)}",
    ]
    if best is not None:
        summary.append(
            f"best verified (the harness's best verify during the episode): reward "
            f"{best.reward:g}, x eager {fmt_x(best.speedup_eager)}, x compile "
            f"{fmt_x(best.speedup_compile)}"
        )
    files = f"files in {episode.out_dir}" if kept else "files not kept (--out DIR keeps them)"
    summary.append(
        f"episode reward (harness): {episode.reward:g}, from the {counted} evaluation; {files}"
    )
    summary.append(
        "each figure is one measurement: timings of the same kernel differ between them by "
        "this machine's noise (on a busy CPU, tens of percent)"
    )
    console.print(Panel("\n".join(summary), title="result", expand=False))


def describe_call(function: dict[str, str]) -> str:
    """A tool call in a few words: ``bash: <command>``, ``write_file <path>``, the name."""
    try:
        args = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        return f"{function.get('name')}(malformed arguments)"
    name = function.get("name", "?")
    if name == "bash":
        return f"bash: {_shorten(str(args.get('command')), 70)}"
    if "path" in args:
        return f"{name} {args['path']}"
    return name


def _gist(output: str) -> list[str]:
    """The most telling lines of a tool's output (a verdict and the runtime, if any), whole;
    else its first line, shortened at a word boundary."""
    lines = [ln.split("\t", 1)[-1].strip() for ln in output.strip().splitlines() if ln.strip()]
    keys = ("correctness:", "runtime:", "verify: FAILED", "compile: FAILED", "reward:")
    telling = [ln for ln in lines if ln.startswith(keys)]
    return telling[:2] if telling else [_shorten(ln, 110) for ln in lines[:1]]


def _shorten(text: str, width: int) -> str:
    """``text`` on one line, cut at a word boundary before ``width`` characters (with ...)."""
    return textwrap.shorten(" ".join(text.split()), width, placeholder=" ...") or text[:width]
