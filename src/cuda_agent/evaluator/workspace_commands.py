"""The workspace commands (compile, verify, profile) and their plain-text output for agents.

Used by ``cuda-agent tool ...`` run by hand and by the agent's tool server, so both print the
same thing. The text informs the agent only; rewards never come from parsing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.pyparse import parse_module
from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.builder.builder import build_extension
from cuda_agent.evaluator.builder.inline import workdir_spec
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.solutions.static import analyse
from cuda_agent.workspace.init import read_metadata
from cuda_agent.workspace.template_files import harness_binding_files

TOOL_COMMANDS = ("compile", "verify", "profile")


@dataclass
class ToolReply:
    exit_code: int
    text: str
    result: EvalResult | None = None


def fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} us"


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def workdir_problem(directory: Path) -> tuple[Problem, dict[str, str]]:
    """The pristine problem a workspace was made for (never the workdir's model.py)."""
    meta = read_metadata(directory)
    problem = resolve_problem(meta["problem"], meta.get("size", "standard"))
    if problem.content_hash != meta.get("problem_hash"):
        raise CudaAgentError(f"the problem {meta['problem']} changed since this workspace was made")
    return problem, meta


Evaluator = Callable[[Problem, Solution, EvalOptions], EvalResult]


def run_tool(
    command: str,
    directory: Path,
    options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
) -> ToolReply:
    """Run one workspace command on ``directory``; ``options`` override the defaults.

    ``evaluator`` runs the evaluation (the pipeline by default; a pool's ``submit`` in a bench).
    """
    if command not in TOOL_COMMANDS:
        raise CudaAgentError(f"unknown tool command {command!r} ({', '.join(TOOL_COMMANDS)})")
    problem, meta = workdir_problem(directory)
    solution = load_solution(directory)
    if command == "compile":
        kernels = {k: v for k, v in solution.files.items() if k.startswith("kernels/")}
        if not any(not k.endswith(".py") for k in kernels):
            return _parse_check(solution, str(meta.get("language", "cuda")))
        build = build_extension(workdir_spec(meta["backend"], kernels, harness_binding_files()))
        if not build.ok:
            return ToolReply(1, f"compile: FAILED\n{build.error}")
        total = build.objects_built + build.objects_cached
        how = (
            "cached, nothing to do"
            if build.cached
            else f"{build.seconds:.1f} s, {build.objects_built} of {total} files compiled"
        )
        return ToolReply(0, f"compile: ok (cuda_extension, {how})")
    opts = options or EvalOptions(backend=meta["backend"])
    opts.backend = meta["backend"]
    opts.profile = command == "profile"
    result = evaluator(problem, solution, opts)
    lines = [agent_summary(result)]
    if command == "profile":
        lines += timing_lines(result) + profile_lines(result)
    return ToolReply(0 if result.correct else 1, "\n".join(lines), result)


def _parse_check(solution: Solution, language: str) -> ToolReply:
    """``compile`` of a workdir with no C++/CUDA sources (Triton kernels, or a C++ workdir
    before its first source): its Python files parse, and ``model_new.py`` defines
    ``ModelNew`` (Triton compiles at the first launch)."""
    for name, text in sorted(solution.files.items()):
        if not name.endswith(".py"):
            continue
        try:
            parse_module(text, filename=name)
        except SyntaxError as err:
            return ToolReply(1, f"compile: FAILED\n{name}:{err.lineno}: {err.msg}")
    report = analyse(solution.files[solution.entry_file], solution.entry_file)
    if report.error:
        return ToolReply(1, f"compile: FAILED\n{report.error}")
    if language == "triton":
        return ToolReply(
            0, "compile: ok (no C++/CUDA sources; Triton compiles at the first launch)"
        )
    return ToolReply(0, "compile: ok (no C++/CUDA sources under kernels/ yet; the Python parses)")


def agent_summary(result: EvalResult) -> str:
    lines = []
    record = result.record
    builds = result.builds
    if result.error and result.error.stage in ("static", "build"):
        return f"compile: FAILED\n{result.error.message}"
    if builds:
        lines.append("compile: ok" + (" (cached)" if all(b.get("cached") for b in builds) else ""))
    if result.error:
        lines.append(f"{result.error.stage}: FAILED\n{result.error.message}")
    else:
        trials = ((record.verify if record is not None else None) or {}).get("trials", [])
        worst = max((t.get("max_abs_error", 0.0) for t in trials), default=0.0)
        lines.append(
            f"correctness: PASS ({len(trials)}/{len(trials)} trials, max abs error {worst:.2g})"
        )
    if result.runtime_us is not None:
        lines.append(
            f"runtime: {fmt_us(result.runtime_us)} | eager {fmt_us(result.eager_us)} "
            f"({fmt_x(result.speedup_eager)}) | torch.compile {fmt_us(result.compile_us)} "
            f"({fmt_x(result.speedup_compile)})"
        )
    lines.extend(f"warning: {w}" for w in result.warnings)
    lines.append(f"reward: {result.reward:g}")
    return "\n".join(lines)


def timing_lines(result: EvalResult) -> list[str]:
    timing = result.record.timing if result.record is not None else None
    if not timing:
        return []
    lines = []
    for side, label in (("candidate", "yours"), ("reference", "eager")):
        s = timing[side]
        lines.append(
            f"{label:>6}: median {fmt_us(s['median_us'])}, p25-p75 "
            f"{fmt_us(s['p25_us'])}-{fmt_us(s['p75_us'])}, min {fmt_us(s['min_us'])}, "
            f"{s['n']} samples"
        )
    return lines


def profile_lines(result: EvalResult) -> list[str]:
    """Per-kernel tables (candidate, eager, compile) and ncu metrics."""
    profile = result.profile()
    lines: list[str] = []
    for side in ("candidate", "eager", "compile"):
        summary = profile.get(side)
        if not summary:
            continue
        lines.append(
            f"{side}: {summary['kernels']} kernel launches, {summary['total_us']:.1f} us "
            f"of device time on {summary['streams']} stream(s)"
        )
        for row in summary["table"][:8]:
            mark = " (yours)" if row.get("custom") else ""
            lines.append(
                f"  {row['total_us']:>10.1f} us  x{row['calls']:<3} {row['name'][:90]}{mark}"
            )
    ncu = profile.get("ncu")
    if ncu and ncu.get("kernels"):
        lines.append("ncu (your top kernels): duration, compute %, memory %, occupancy %, DRAM MB")
        for k in ncu["kernels"][:5]:
            lines.append(
                f"  {k.get('duration_us', 0):>9.1f} us  compute {k.get('compute_pct', 0):5.1f}%  "
                f"memory {k.get('memory_pct', 0):5.1f}%  "
                f"occupancy {k.get('occupancy_pct', 0):5.1f}%  "
                f"DRAM {k.get('dram_bytes', 0) / 1e6:8.1f}  {k['name'][:60]}"
            )
    elif ncu and ncu.get("error"):
        lines.append(f"ncu: unavailable ({ncu['error']})")
    if not lines:
        lines.append("no kernel profile (the profile stage runs on the cuda backend)")
    return lines
