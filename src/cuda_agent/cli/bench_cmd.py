"""``cuda-agent bench run|report``: benchmark solutions or a model over a problem set."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cuda_agent.agent.loop import AgentLimits
from cuda_agent.bench.agreement import is_kernelbench_results, kernelbench_comparison
from cuda_agent.bench.fingerprint import (
    FINGERPRINT_KEY,
    check_resume,
    discard_results,
    fingerprint,
)
from cuda_agent.bench.metrics import compute_metrics
from cuda_agent.bench.paper import TABLE_1, paper_metrics
from cuda_agent.bench.records import (
    AttemptRecord,
    chosen_attempts,
    isolation_summary,
    read_records,
    read_run_info,
    write_run_info,
)
from cuda_agent.bench.report_data import METRIC_COLUMNS, metric_subsets, subset_metrics
from cuda_agent.bench.report_format import fmt_metric
from cuda_agent.bench.run import AgentSpec, Progress, run_agent, run_solutions, summary_counts
from cuda_agent.bench.run_figures import RunFigures
from cuda_agent.cli.common import (
    err_console,
    one_line_errors,
    out_console,
    parse_csv,
    parse_levels,
    print_command_line,
    print_json,
    require_positive,
    resolve_backend,
    resolve_size,
)
from cuda_agent.cli.pools import check_pool_choice, make_pool
from cuda_agent.cli.progress_log import Reporter
from cuda_agent.cli.report_text import print_kernelbench, print_lint_summary
from cuda_agent.cli.solve_cmd import check_tool_format
from cuda_agent.cluster.ledger import LEGEND as UTILIZATION_LEGEND
from cuda_agent.cluster.ledger import describe as describe_utilization
from cuda_agent.cluster.pool import EvalPool
from cuda_agent.core.errors import ConfigError, CudaAgentError
from cuda_agent.core.policy import DEFAULT_POLICY, Policy
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.sets import load_problem_set

app = typer.Typer(help="Benchmark solutions or a model over a problem set.", no_args_is_help=True)


@app.command("run")
@one_line_errors
def run_command(
    out: Path = typer.Option(..., "--out", help="Run folder (results.jsonl; reruns resume)."),
    problems: str = typer.Option("bundled", help="'bundled', a KernelBench checkout, a folder."),
    levels: str | None = typer.Option(None, help="Only these levels, e.g. 1,2,3."),
    solutions: Path | None = typer.Option(None, help="Folder with <id>.py or <id>/ solutions."),
    model: str = typer.Option("", help="Agent mode: model name at the endpoint."),
    base_url: str = typer.Option("", help="Agent mode: OpenAI-compatible base URL."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Variable holding the API key."),
    attempts: int = typer.Option(1, help="Agent mode: attempts per problem."),
    parallel: int = typer.Option(1, help="Agent mode: episodes at once."),
    max_turns: int = typer.Option(200, help="Agent mode: turn limit per episode."),
    tool_format: str = typer.Option("auto", help="Agent mode: auto, native, hermes or json."),
    max_output_tokens: int = typer.Option(16384, help="Agent mode: output cap per turn."),
    context_tokens: int = typer.Option(131072, help="Agent mode: context-token budget."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    size: str = typer.Option("auto", help="small, standard, or auto (small on cpu)."),
    baselines: str = typer.Option("eager,compile", help="eager,compile | eager"),
    policy: Policy = typer.Option(DEFAULT_POLICY, help="strict, kernelbench or off."),
    memory_check: bool = typer.Option(
        True,
        "--memory-check/--no-memory-check",
        help="Run each correct candidate once more under a memory checker (compute-sanitizer "
        "on cuda, AddressSanitizer on cpu).",
    ),
    workers: int | None = typer.Option(None, help="Device workers (default: every GPU)."),
    ray: str | None = typer.Option(None, help="Use Ray: 'local' or a cluster address."),
    service: str | None = typer.Option(
        None,
        "--service",
        help="Evaluate through a reward service at this URL (token from CUDA_AGENT_TOKEN).",
    ),
    no_service: bool = typer.Option(
        False,
        "--no-service",
        help="Evaluate with this run's own workers even while this machine's `cuda-agent "
        "serve` evaluates on the same backend (refused without it: they would share the "
        "device; run.json records it).",
    ),
    spare_workers: int = typer.Option(
        3, help="Started evaluation processes kept ready per device (hides their start-up)."
    ),
    build_workers: int | None = typer.Option(
        None, help="Builds at once on this machine (default: CPU cores - 1)."
    ),
    export_best: Path | None = typer.Option(
        None, "--export-best", help="Then export each problem's best correct solution: one package."
    ),
    device_budget: str = typer.Option(
        "auto",
        "--device-budget",
        help="How long each candidate may keep its device once verification starts: auto "
        "(from the reference's call time), off, SECONDS, or xFACTOR (auto scaled).",
    ),
    jobs_per_gpu: int = typer.Option(
        1,
        "--jobs-per-gpu",
        help="Evaluations sharing each device, taking turns (run-time compiles off the turn); "
        "for verdicts in bulk, not for timing.",
    ),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="Discard the results already in --out and start over (a rerun otherwise resumes, "
        "and only with the same options, problems and solutions).",
    ),
) -> None:
    """Evaluate every problem of the set; progress shows live pass / faster counts (a bar on a
    terminal; in a log, a line per finished job and a summary every 15 s)."""
    require_positive(
        attempts=attempts,
        parallel=parallel,
        max_turns=max_turns,
        max_output_tokens=max_output_tokens,
        context_tokens=context_tokens,
        workers=workers,
        build_workers=build_workers,
        jobs_per_gpu=jobs_per_gpu,
    )
    target = choose_target(backend, service, no_service, ray, workers, jobs_per_gpu, device_budget)
    problem_list = select_problems(problems, levels, resolve_size(size, target.backend))
    options = EvalOptions(
        backend=target.backend,
        baselines=parse_csv(baselines),
        policy=policy,
        keep_spare_worker=True,
        spare_depth=spare_workers,
        shapes=export_best is not None and solutions is not None,  # agent mode: after the run
        device_budget=device_budget,
        memory_check=memory_check,
    ).validate()
    check_run_inputs(solutions, model, tool_format, export_best, jobs_per_gpu)
    if solutions is not None:
        source = {"mode": "solutions", "solutions": str(solutions.resolve())}
    else:
        source = agent_source(model, tool_format, max_turns, max_output_tokens, context_tokens)
    check_pool_choice(ray, jobs_per_gpu)  # before run.json is written
    prepare_run_folder(out, fingerprint(options, problem_list, source), fresh)
    if target.beside is not None:  # the device was not this run's alone: said where timings are
        write_run_info(out, {**read_run_info(out), "beside_service": target.beside})
    pool = target.remote
    if pool is None:
        pool = make_pool(
            target.backend, workers, ray, build_workers=build_workers, jobs_per_device=jobs_per_gpu
        )
    if solutions is not None:
        work = functools.partial(run_solutions, problem_list, solutions)
    else:
        limits = AgentLimits(
            max_turns=max_turns, max_output_tokens=max_output_tokens, context_tokens=context_tokens
        )
        spec = agent_spec(model, base_url, api_key_env, tool_format, attempts, parallel, limits)
        work = functools.partial(run_agent, problem_list, spec)

    def evaluate(pool: EvalPool, on_record: Progress) -> None:
        work(pool, options, out, on_record)

    total = len(problem_list) * (attempts if model else 1)
    figures_written = run_with_progress(out, pool, total, evaluate)
    report_run(out, figures_written)
    if export_best is not None:
        from cuda_agent.cli.export_cmd import export_run_best

        export_run_best(out, problem_list, options, export_best)


@dataclass
class EvalTarget:
    """Where a run's evaluations go: the backend, a reward service's pool (``remote``) or this
    machine's own workers, and the local service found on the same backend (``beside``)."""

    backend: str
    remote: EvalPool | None = None
    beside: dict[str, Any] | None = None


def choose_target(
    backend: str,
    service: str | None,
    no_service: bool,
    ray: str | None,
    workers: int | None,
    jobs_per_gpu: int,
    device_budget: str,
) -> EvalTarget:
    """The reward service at ``service`` (checked: its backend, no local pool options), or this
    machine's workers on ``backend`` (a local service on it refused unless ``no_service``)."""
    if no_service and service is not None:
        raise ConfigError(f"--service {service} and --no-service: give one of them")
    if service is None:
        chosen = resolve_backend(backend)
        return EvalTarget(chosen, beside=local_service_beside(chosen, no_service))
    if ray or workers or jobs_per_gpu > 1:
        raise ConfigError("--service evaluates on the service's pool: no --ray/--workers")
    if device_budget != "auto":
        raise ConfigError("--service: the service sets the device budget, not --device-budget")
    from cuda_agent.service.remote_pool import ServicePool

    remote = ServicePool(service)
    chosen = remote.backend if backend == "auto" else resolve_backend(backend, False)
    if remote.backend != chosen:
        raise ConfigError(f"the service at {service} evaluates on {remote.backend}")
    return EvalTarget(chosen, remote=remote)


def check_run_inputs(
    solutions: Path | None,
    model: str,
    tool_format: str,
    export_best: Path | None,
    jobs_per_gpu: int,
) -> None:
    """One mode (solutions or an agent), a usable solutions folder, tool format and export
    target, before anything runs; a note where jobs share a device."""
    if (solutions is None) == (not model):
        raise CudaAgentError("give either --solutions DIR or --model/--base-url (agent mode)")
    if solutions is not None and not solutions.is_dir():
        raise ConfigError(f"--solutions {solutions}: no such folder")
    check_tool_format(tool_format)
    if export_best is not None:
        from cuda_agent.export import check_target

        check_target(export_best)  # before the run, not after it
    if jobs_per_gpu > 1:
        err_console.print(
            f"note: --jobs-per-gpu {jobs_per_gpu}: for verdicts in bulk; the other jobs' "
            "CPU work runs beside each timing, so absolute times may read high (run.json says "
            "jobs_per_device); time with the default 1 (docs/benchmarking.md)"
        )


def agent_spec(
    model: str,
    base_url: str,
    api_key_env: str,
    tool_format: str,
    attempts: int,
    parallel: int,
    limits: AgentLimits,
) -> AgentSpec:
    """Agent mode's episodes: the model at ``base_url``, its key from ``api_key_env``, each
    episode under ``limits``."""
    from cuda_agent.agent.models import OpenAIChatModel

    key = os.environ.get(api_key_env, "")
    return AgentSpec(
        make_model=lambda: OpenAIChatModel(model, base_url, key, tool_format=tool_format),
        attempts=attempts,
        limits=limits,
        parallel=parallel,
    )


def run_with_progress(
    out: Path, pool: EvalPool, total: int, evaluate: Callable[[EvalPool, Progress], None]
) -> bool:
    """``evaluate(pool, on_record)`` with live counts, each record's figures into run.json
    (however the run ends); whether those figures were written."""
    seen: list[AttemptRecord] = list(read_records(out)) if out.exists() else []
    run_figures = RunFigures(out, pool)
    with run_figures, pool, Reporter("bench", total, pool.board, done=len(seen)) as reporter:

        def on_record(record: AttemptRecord, finished: int, total: int) -> None:
            seen.append(record)
            run_figures.add(record.result)
            counts = summary_counts(list(chosen_attempts(seen).values()))
            reporter.finished(
                verdict_line(record),
                f"pass {counts['correct']} | faster than eager {counts['faster_eager']} | "
                f"than compile {counts['faster_compile']}",
            )

        evaluate(pool, on_record)
        run_figures.stop()
    return run_figures.written


def report_run(out: Path, figures_written: bool) -> None:
    """The run's metrics table, its device utilization where written, and where to look."""
    _print_table([("this run", compute_metrics(chosen_attempts(read_records(out))))])
    if figures_written:
        out_console.print(describe_utilization(read_run_info(out)["utilization"]))
        out_console.print(UTILIZATION_LEGEND, style="dim", markup=False, highlight=False)
    print_command_line(
        out_console, f"results: {out / 'results.jsonl'}; report: cuda-agent bench report {out}"
    )


def local_service_beside(backend: str, no_service: bool) -> dict[str, Any] | None:
    """This machine's ``cuda-agent serve`` (``evaluator/service.py``) when it evaluates on
    ``backend``: its evaluations would run on the device beside this run's own workers, so the
    run is refused (one line, exit 2) unless ``--no-service`` says to run beside it anyway;
    then its ``{"pid", "backend"}``, for run.json. None when no such service answers."""
    from cuda_agent.evaluator.service import service_info

    info = service_info()
    if info is None or info.get("backend") != backend:
        return None
    pid = info.get("pid")
    if not no_service:
        raise ConfigError(
            f"this machine's `cuda-agent serve` (pid {pid}) evaluates on {backend}: this run's "
            "workers would share the device with it, and timings would count its work; stop "
            "it, send the run through a reward service (`serve --http`, then --service URL), "
            "or give --no-service to run beside it anyway (run.json records it)"
        )
    err_console.print(
        f"note: --no-service: running beside this machine's `cuda-agent serve` (pid {pid}, "
        f"{backend}); its evaluations share the device (run.json: beside_service)"
    )
    return {"pid": pid, "backend": backend}


def select_problems(spec: str, levels: str | None, size: str) -> list[Problem]:
    """The problem set at ``levels``; one line (exit 2) when that selects no problem."""
    wanted = parse_levels(levels)
    selected = load_problem_set(spec, wanted, size)
    if selected:
        return selected
    if not wanted:
        raise ConfigError(f"--problems {spec}: no problems there")
    present = sorted({p.level for p in load_problem_set(spec, None, size) if p.level is not None})
    have = ", ".join(map(str, present)) or "none"
    raise ConfigError(f"--levels {levels}: no problem of {spec} at that level (levels: {have})")


def agent_source(
    model: str,
    tool_format: str,
    max_turns: int,
    max_output_tokens: int,
    context_tokens: int,
) -> dict[str, str]:
    """The agent mode's part of the run's fingerprint (not the endpoint's URL: the same model
    served elsewhere after a restart resumes the run)."""
    return {
        "mode": "agent",
        "model": model,
        "tool_format": tool_format,
        "max_turns": str(max_turns),
        "max_output_tokens": str(max_output_tokens),
        "context_tokens": str(context_tokens),
    }


def prepare_run_folder(out: Path, wanted: dict[str, str], fresh: bool) -> None:
    """Discard (``--fresh``) or check (resume) what ``out`` holds, then record ``wanted``."""
    if fresh:
        discard_results(out)
    note = check_resume(out, wanted)
    if note:
        err_console.print(note, markup=False, soft_wrap=True)
    out.mkdir(parents=True, exist_ok=True)
    write_run_info(out, {**read_run_info(out), FINGERPRINT_KEY: wanted})


def verdict_line(record: AttemptRecord) -> str:
    """``L1_5: correct, 1.23x eager, 0.97x compile (14.2 s)`` or ``L1_7: failed (build: ...)``."""
    result = record.result
    label = record.problem_id + (f"#{record.attempt}" if record.source == "agent" else "")
    if record.correct:
        speed = [
            f"{value:.2f}x {name}"
            for value, name in (
                (result.speedup_eager, "eager"),
                (result.speedup_compile, "compile"),
            )
            if value is not None
        ]
        verdict = ", ".join(["correct", *speed])
    else:
        stage = result.error.stage if result.error is not None else "?"
        verdict = f"failed at {stage} [{','.join(result.flags[:3])}]"
    return f"{label}: {verdict} ({record.wall_s:.1f} s)"


@app.command("references")
@one_line_errors
def references_command(
    out: Path = typer.Option(..., "--out", help="Folder to write <id>.py solutions into."),
    problems: str = typer.Option("bundled", help="'bundled', a KernelBench checkout, a folder."),
    levels: str | None = typer.Option(None, help="Only these levels, e.g. 1,2,3."),
) -> None:
    """Write each problem's own reference as its solution (``Model`` renamed ``ModelNew``).

    Benchmarking them (``bench run --solutions OUT --policy off``) measures the harness
    itself: every one must be correct, with speed-ups close to 1.
    """
    from cuda_agent.workspace.init import starting_model_new

    problem_list = load_problem_set(problems, parse_levels(levels))
    out.mkdir(parents=True, exist_ok=True)
    for problem in problem_list:
        (out / f"{problem.id}.py").write_text(starting_model_new(problem.source))
    out_console.print(f"wrote {len(problem_list)} reference solutions to {out}")


@app.command("report")
@one_line_errors
def report_command(
    run_dir: Path = typer.Argument(..., help="A run folder made by `bench run`."),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics as JSON."),
    html: Path | None = typer.Option(None, help="Write a self-contained HTML report here."),
    compare: list[str] = typer.Option(
        [],
        help="Another run folder, paper:MODEL, or KernelBench results (its eval_results.json "
        "or benchmarks/compat's kernelbench JSONL): problem by problem beside this run.",
    ),
    kb_level: int | None = typer.Option(
        None, help="The level of a KernelBench eval_results.json (default: the run's level)."
    ),
) -> None:
    """The paper's metrics for a run (and others side by side), over all problems and over
    the problems with no task-lint flag."""
    if not run_dir.is_dir():
        raise CudaAgentError(f"{run_dir}: no such run folder (`bench run --out FOLDER` makes one)")
    records = read_records(run_dir)
    if not records:
        raise CudaAgentError(
            f"{run_dir}: no results in this folder (no results.jsonl records: a run that "
            "judged nothing yet, or not a `bench run` folder)"
        )
    metrics = compute_metrics(chosen_attempts(records))
    isolation = isolation_summary(records)
    kernelbench = [
        kernelbench_comparison(Path(spec), records, kb_level)
        for spec in compare
        if is_kernelbench_results(spec)
    ]
    comparisons = [resolve_comparison(s) for s in compare if not is_kernelbench_results(s)]
    comparisons += [(k.label, k.metrics) for k in kernelbench]
    if as_json:
        print_json(
            {
                "isolation": isolation,
                **metrics,
                "compare": {label: m for label, m in comparisons},
                "kernelbench": {k.label: k.to_dict() for k in kernelbench},
            }
        )
    else:
        out_console.print(f"isolation: {isolation}", markup=False, soft_wrap=True)
        unflagged = ("this run, no lint flag", metrics["no_lint_flag"])
        _print_table([("this run", metrics), unflagged, *comparisons])
        print_lint_summary(metrics)
        for comparison in kernelbench:
            print_kernelbench(comparison)
    if html is not None:
        from cuda_agent.bench.report import write_html

        write_html(run_dir, html, comparisons, kernelbench)
        err_console.print(f"wrote {html}")


def resolve_comparison(spec: str) -> tuple[str, dict[str, Any]]:
    if spec.startswith("paper:"):
        name = spec[len("paper:") :]
        if name not in TABLE_1:
            raise CudaAgentError(f"{spec}: the paper's table has {', '.join(TABLE_1)}")
        return f"{name} (paper)", paper_metrics(name)
    folder = Path(spec)
    records = read_records(folder)
    if not records:
        raise CudaAgentError(f"{spec}: not a run folder (no results) nor paper:MODEL")
    return folder.name, compute_metrics(chosen_attempts(records))


def _print_table(rows: list[tuple[str, dict[str, Any]]]) -> None:
    """One table per run (this run, its problems with no lint flag, each comparison): a row
    per subset (overall, each level), a column per metric (the HTML report's
    ``METRIC_COLUMNS``), so it fits 80 columns. Pass rate and the shares faster than each
    baseline are of all problems; speed-ups are geometric means over the correct ones
    (docs/benchmarking.md)."""
    for label, metrics in rows:
        table = Table(title=label, title_justify="left")
        table.add_column("set")
        for _key, title, _kind in METRIC_COLUMNS:
            table.add_column(title, justify="right")
        for subset in metric_subsets(metrics):
            entry = subset_metrics(metrics, subset.key)
            cells = [fmt_metric(entry.get(key), kind) for key, _, kind in METRIC_COLUMNS]
            table.add_row(subset.name, *cells)
        out_console.print(table)


json_dumps = json.dumps  # kept for callers that render reports as text
