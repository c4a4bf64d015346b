"""``cuda-agent eval PROBLEM SOLUTION``: evaluate one solution against one problem."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from cuda_agent.cli.common import (
    EvalArgs,
    fail,
    one_line_errors,
    out_console,
    parse_csv,
    print_json,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.progress_log import Status
from cuda_agent.cli.render import render_profile, render_result
from cuda_agent.core.policy import DEFAULT_POLICY, Policy
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.service import evaluate_remote, service_info
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution


def eval_command(
    problem: str = typer.Argument(..., help="A bundled problem id or a problem file."),
    solution: Path = typer.Argument(..., help="A .py file with ModelNew, or a workdir."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto (cuda when a GPU is visible)."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager | ''."),
    seed: int | None = typer.Option(None, help="Evaluation seed (default: a fresh secret one)."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    policy: Policy = typer.Option(
        DEFAULT_POLICY, help="strict (paper rules), kernelbench, or off."
    ),
    precision: str = typer.Option("ieee", help="ieee (true fp32), tf32, or torch-default."),
    reward: str = typer.Option("milestone", help="milestone (-1/1/2/3) or continuous."),
    trials: int = typer.Option(5, help="Correctness trials, each on fresh inputs."),
    atol: float | None = typer.Option(None, help="Absolute tolerance (default 1e-2)."),
    rtol: float | None = typer.Option(None, help="Relative tolerance (default 1e-2)."),
    profile: bool = typer.Option(False, "--profile", help="Per-kernel tables and ncu metrics."),
    refresh_baselines: bool = typer.Option(
        False, "--refresh-baselines", help="Measure torch.compile again, ignoring the cache."
    ),
    timeout: float = typer.Option(600.0, help="Hard limit in seconds for the candidate."),
    device_budget: str = typer.Option(
        "auto",
        "--device-budget",
        help="How long the candidate may keep the device once verification starts: auto "
        "(from the reference's call time), off, SECONDS, or xFACTOR (auto scaled).",
    ),
    shapes: bool = typer.Option(
        False,
        "--shapes",
        help="Also verify at other sizes (each size constant halved, doubled, odd).",
    ),
    reward_shapes: bool = typer.Option(
        False, "--reward-shapes", help="A failed size makes the reward -1 (implies --shapes)."
    ),
    language: str | None = typer.Option(
        None, help="Require the solution's kernel language: cuda or triton."
    ),
    memory_check: bool = typer.Option(
        True,
        "--memory-check/--no-memory-check",
        help="Run a correct candidate once more under a memory checker (compute-sanitizer "
        "memcheck on cuda, AddressSanitizer on cpu); an invalid access rejects it.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print exactly one JSON object."),
    service: str = typer.Option(
        "auto",
        "--service",
        help="auto: this machine's `cuda-agent serve` when it runs; or the URL of a reward "
        "service (`serve --http`; token from CUDA_AGENT_TOKEN).",
    ),
    no_service: bool = typer.Option(False, "--no-service", help="Evaluate in this process."),
) -> None:
    """Evaluate SOLUTION against PROBLEM: build, verify, time, reward."""
    if no_service and service != "auto":
        raise fail(f"--service {service} and --no-service: give one of them")
    options = eval_options(
        baselines=parse_csv(baselines),
        seed=seed,
        policy=policy,
        precision=precision,
        reward=reward,
        trials=trials,
        atol=atol,
        rtol=rtol,
        profile=profile,
        use_baseline_cache=not refresh_baselines,
        worker_timeout_s=timeout,
        device_budget=device_budget,
        shapes=shapes,
        reward_shapes=reward_shapes,
        language=language,
        memory_check=memory_check,
    )
    args = EvalArgs(problem, solution, backend, size, options, quiet=as_json)
    if service.startswith(("http://", "https://")) and not no_service:
        from cuda_agent.cli.remote import evaluate_at  # httpx, only for a remote service

        result = evaluate_at(service, args)
    else:
        if service != "auto" and not no_service:
            raise fail(f"--service {service!r}: give auto or an http(s):// URL")
        result = run_eval(args, service=not no_service)
    if as_json:
        print_json(result.to_dict())
    else:
        render_result(out_console, result)
        if profile:
            render_profile(out_console, result)
        if result.details.shapes is not None:
            render_shapes(out_console, result)
    if result.error is not None and result.error.stage == "problem":
        raise fail(f"the problem itself failed: {result.error.message}")


def render_shapes(console: Console, result: EvalResult) -> None:
    """One row per size: its sizes, verdict and error (``--shapes``)."""
    general = {True: "yes", False: "[red]no[/]", None: "not known (no other size ran)"}
    table = Table(title=f"sizes (generalizes: {general[result.generalizes]})")
    for column in ("size", "kind", "verdict", "error"):
        table.add_column(column)
    colours = {"pass": "green", "fail": "red", "skipped": "yellow"}
    for entry in result.details.shapes or []:
        verdict = entry["verdict"]
        table.add_row(
            entry["label"],
            entry["kind"],
            f"[{colours.get(verdict, 'white')}]{verdict}[/]",
            entry.get("error") or "",
        )
    console.print(table)


@one_line_errors
def eval_options(**values: Any) -> EvalOptions:
    """The command's options, validated before anything is loaded (the backend, which may
    need a look for a GPU, is set once they are known to be usable)."""
    return EvalOptions(**values).validate()


@one_line_errors
def run_eval(args: EvalArgs, service: bool = True) -> EvalResult:
    """Evaluate here, or through this machine's evaluation service when ``service`` and one
    runs for the backend chosen."""
    info = service_info() if service else None
    if args.backend == "auto" and info is not None:
        chosen = str(info["backend"])  # no torch import needed to know
    else:  # this machine's service evaluating on cuda has the GPU: no look needed here
        served = info is not None and info.get("backend") == args.backend
        chosen = resolve_backend(args.backend, need_device=not served)
    opts = replace(args.opts, backend=chosen).validate()
    prob = resolve_problem(args.problem, resolve_size(args.size, chosen))
    sol = load_solution(args.solution)
    remote = info is not None and info.get("backend") == chosen

    def run(progress: Callable[[str, str], None] | None) -> EvalResult:
        if remote:
            result = evaluate_remote(prob, sol, opts, progress)
            if result is not None:
                return result
        return evaluate(prob, sol, opts, progress=progress)

    if args.quiet:
        return run(None)
    with Status("eval", f"evaluating {sol.path.name} on {prob.id} ({chosen})") as status:

        def progress(stage: str, text: str) -> None:
            status.update(f"{stage}: {text} ({prob.id}, {chosen})")

        return run(progress)
