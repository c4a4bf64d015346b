"""``cuda-agent tool compile|verify|profile``: the workspace commands an agent runs in its workdir.

Output is plain text for a model to read: short, with errors at file:line first. What these
commands print informs the agent only; rewards are computed by the harness on the final
workdir, never parsed from here. Exit status: 0 on success, 1 when the candidate fails.
"""

from __future__ import annotations

from pathlib import Path

import typer

from cuda_agent.cli.common import one_line_errors
from cuda_agent.cli.render import fmt_us, fmt_x, profile_lines
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.build.builder import build_extension
from cuda_agent.evaluator.build.inline import workdir_spec
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.init import read_metadata
from cuda_agent.workspace.template_files import harness_binding_files

app = typer.Typer(help="Workspace commands (run inside a workdir).", no_args_is_help=True)


@app.command("compile")
@one_line_errors
def compile_command(directory: Path = typer.Argument(Path("."), help="The workdir.")) -> None:
    """Build cuda_extension from kernels/ and print the first errors."""
    meta = read_metadata(directory)
    solution = load_solution(directory)
    kernels = {k: v for k, v in solution.files.items() if k.startswith("kernels/")}
    spec = workdir_spec(meta["backend"], kernels, harness_binding_files())
    result = build_extension(spec)
    if not result.ok:
        typer.echo(f"compile: FAILED\n{result.error}")
        raise typer.Exit(1)
    how = (
        "cached, nothing to do"
        if result.cached
        else (
            f"{result.seconds:.1f} s, {result.objects_built} of "
            f"{result.objects_built + result.objects_cached} files compiled"
        )
    )
    typer.echo(f"compile: ok (cuda_extension, {how})")


@app.command("verify")
@one_line_errors
def verify_command(
    directory: Path = typer.Argument(Path("."), help="The workdir."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager | ''"),
) -> None:
    """Build, check correctness and the rules on fresh inputs, and time against the baselines."""
    result = _evaluate_workdir(directory, baselines)
    typer.echo(agent_summary(result))
    if not result.correct:
        raise typer.Exit(1)


@app.command("profile")
@one_line_errors
def profile_command(directory: Path = typer.Argument(Path("."), help="The workdir.")) -> None:
    """Timing detail, per-kernel tables (cuda) and ncu metrics for your kernels."""
    result = _evaluate_workdir(directory, "eager,compile", profile=True)
    typer.echo(agent_summary(result))
    timing = result.details.get("timing")
    if timing:
        for side in ("candidate", "reference"):
            s = timing[side]
            label = "yours" if side == "candidate" else "eager"
            typer.echo(
                f"{label:>6}: median {fmt_us(s['median_us'])}, p25-p75 "
                f"{fmt_us(s['p25_us'])}-{fmt_us(s['p75_us'])}, min {fmt_us(s['min_us'])}, "
                f"{s['n']} samples"
            )
    for line in profile_lines(result):
        typer.echo(line)
    if not result.correct:
        raise typer.Exit(1)


def _evaluate_workdir(directory: Path, baselines: str, profile: bool = False) -> EvalResult:
    meta = read_metadata(directory)
    problem = resolve_problem(meta["problem"], meta.get("size", "standard"))
    if problem.content_hash != meta.get("problem_hash"):
        raise CudaAgentError(
            f"the problem {meta['problem']} changed since this workspace was created"
        )
    options = EvalOptions(
        backend=meta["backend"],
        baselines=tuple(b for b in baselines.split(",") if b),
        profile=profile,
    )
    return evaluate(problem, load_solution(directory), options)


def agent_summary(result: EvalResult) -> str:
    lines = []
    builds = result.details.get("builds") or []
    if result.error and result.error.stage in ("static", "build"):
        lines.append(f"compile: FAILED\n{result.error.message}")
        return "\n".join(lines)
    if builds:
        lines.append("compile: ok" + (" (cached)" if all(b.get("cached") for b in builds) else ""))
    if result.error:
        lines.append(f"{result.error.stage}: FAILED\n{result.error.message}")
    else:
        trials = result.details.get("verify", {}).get("trials", [])
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
