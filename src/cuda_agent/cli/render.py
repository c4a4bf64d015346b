"""Readable (rich) renderings of evaluation results, for humans; ``--json`` bypasses them."""

from __future__ import annotations

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.workspace_commands import fmt_us, fmt_x, profile_lines


def verdict_text(result: EvalResult) -> str:
    if result.error is not None:
        return f"[red]failed at {result.error.stage}[/]"
    return "[green]correct[/]" if result.correct else "[red]incorrect[/]"


# stages that stop an evaluation before the candidate is built: "compiled" is not known there
BEFORE_BUILD = ("problem", "static", "internal")


def language_text(language: str, backend: str) -> str:
    """The kernel language as a user reads it: C++ extensions on the cpu backend are C++."""
    return language.replace("cuda", "C++") if backend == "cpu" else language


def compiled_text(result: EvalResult) -> str:
    if result.compiled:
        return "yes"
    if result.error is not None and result.error.stage in BEFORE_BUILD:
        return f"- (stopped at {result.error.stage})"
    return "no"


def render_result(console: Console, result: EvalResult) -> None:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("problem", f"{result.problem_id} ({result.details.size or '?'} size)")
    record = result.record
    device = ((record.device if record is not None else None) or {}).get("device")
    table.add_row("backend", f"{result.backend} ({device})" if device else result.backend)
    if result.language:
        table.add_row("language", language_text(result.language, result.backend))
    table.add_row("verdict", verdict_text(result))
    table.add_row("compiled", compiled_text(result))
    table.add_row("runtime", fmt_us(result.runtime_us))
    table.add_row("eager", f"{fmt_us(result.eager_us)}  (speed-up {fmt_x(result.speedup_eager)})")
    table.add_row(
        "compile", f"{fmt_us(result.compile_us)}  (speed-up {fmt_x(result.speedup_compile)})"
    )
    table.add_row("reward", f"[bold]{result.reward:g}[/]")
    semantics = [f"policy {result.details.policy or '?'}"]
    if record is not None and record.module_mode:
        semantics.append(f"modules in {record.module_mode} mode")
    table.add_row("rules", ", ".join(semantics))
    memory = result.details.memory_check
    if memory:
        table.add_row("memory", _memory_text(memory))
    if result.flags:
        table.add_row("flags", ", ".join(result.flags))
    for warning in result.warnings:
        table.add_row("warning", warning)
    timing = record.timing if record is not None else None
    if timing:
        table.add_row(
            "timing",
            f"{timing['rounds']} interleaved rounds, {timing['checked_rounds']} "
            f"checked, stop: {timing['stop_reason']}",
        )
    builds = result.builds
    if builds:
        cached = all(b.get("cached") for b in builds)
        seconds = sum(b.get("seconds", 0) for b in builds)
        table.add_row("build", "cached" if cached else f"{seconds:.1f} s")
    console.print(Panel(table, title="evaluation", expand=False))
    if result.error is not None:
        console.print(
            Panel(
                result.error.message,
                title=f"error ({result.error.stage})",
                border_style="red",
                expand=False,
            )
        )


def _memory_text(check: dict[str, object]) -> str:
    """One line on the memory check (``details.memory_check``)."""
    if check.get("incomplete"):
        return f"not checked: {check['incomplete']}"
    if check.get("errors"):
        return f"[red]{check['errors']} invalid access(es)[/] ({check.get('tool')})"
    if check.get("output_ok") is False:
        return f"[red]reads uninitialised memory[/] ({check.get('tool')})"
    return f"clean ({check.get('tool')}, {check.get('seconds', 0):.1f} s)"


def render_profile(console: Console, result: EvalResult) -> None:
    console.print(Panel("\n".join(profile_lines(result)), title="profile", expand=False))
