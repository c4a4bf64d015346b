"""``cuda-agent train STAGE``: one stage of the paper's training recipe (``rl/recipe.py``)."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import typer

from cuda_agent.cli.common import err_console, one_line_errors, out_console, print_json
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.rl.models.path import resolve_config_models
from cuda_agent.rl.recipe import STAGES, Plan, load_config, plan
from cuda_agent.rl.verl.compat import VERL_VERSION

# The verl adapters a PPO stage needs at run time (its dry run needs none of them).
VERL_ADAPTERS = ("cuda_agent.rl.verl.agent_loop",)


@one_line_errors
def train_command(
    stage: str = typer.Argument(..., help=f"One of: {', '.join(STAGES)}."),
    overrides: list[str] = typer.Argument(None, help="key.sub=value settings, e.g. steps=10."),
    config: Path | None = typer.Option(None, "--config", help="A YAML file over the defaults."),
    model: str | None = typer.Option(
        None,
        "--model",
        help="The policy (model.path): a folder, a hub id, 'tiny', 'smollm2', "
        "'qwen-coder-0.5b' or 'qwen-coder-1.5b'.",
    ),
    task: str | None = typer.Option(
        None,
        "--task",
        help="A curriculum rung (curriculum.task): model-new, fill-in, kernel, or several "
        "joined by + (fill-in+kernel); single-turn GRPO on the curriculum's problems.",
    ),
    steps: int | None = typer.Option(None, "--steps", help="Training steps."),
    backend: str | None = typer.Option(None, "--backend", help="Evaluation backend: cpu or cuda."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, start nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """Run (or, with --dry-run, show) one training stage with the paper's settings."""
    flags = [f"model.path={model}"] if model else []
    flags += [f"steps={steps}"] if steps is not None else []
    flags += [f"curriculum.task={task}"] if task else []
    flags += [f"evaluation.backend={backend}"] if backend else []
    settings = load_config(stage, config, (*flags, *(overrides or ())))
    # 'tiny' and 'smollm2' become their folders in the cache; a stage that loads the model
    # here (grpo) checks a hub id now, so an offline machine fails in seconds with one line
    loads_here = stage == "grpo" or (stage == "rft" and bool(task))
    # a dry run names the built-in models' folders but builds or converts nothing
    resolve_config_models(settings, check_hub=loads_here and not dry_run, build=not dry_run)
    resolved = plan(stage, settings)
    path = settings.get("model", {}).get("path")
    if dry_run and isinstance(path, str) and Path(path).is_absolute() and not Path(path).exists():
        resolved.notes.append(f"the model {model or path} is built into {path} on first use")
    if as_json:
        print_json(resolved.as_dict())
    elif dry_run:
        _print_plan(resolved)
    if dry_run:
        return
    _run(resolved)


def _print_plan(resolved: Plan) -> None:
    import yaml

    out_console.print(
        f"[bold]stage[/bold] {resolved.stage} ([bold]engine[/bold] {resolved.engine})"
    )
    out_console.print("[bold]configuration[/bold]")
    out_console.print(yaml.safe_dump(resolved.config, sort_keys=False).rstrip(), markup=False)
    for path, content in resolved.files.items():
        out_console.print(f"[bold]file[/bold] {path}")
        out_console.print(content.rstrip(), markup=False)
    for path, source in resolved.datasets.items():
        out_console.print(f"[bold]dataset[/bold] {path} <- {source}", markup=False)
    out_console.print("[bold]command[/bold]")
    out_console.print(" \\\n    ".join(resolved.command), markup=False, soft_wrap=True)
    for note in resolved.notes:
        out_console.print(f"note: {note}", markup=False)


def _run(resolved: Plan) -> None:
    if resolved.engine == "trl-sft":  # rft on a curriculum rung: sample, keep, fine-tune
        _run_curriculum_rft(resolved)
        return
    if resolved.stage == "rft":  # the data first: it needs no engine
        from cuda_agent.rl.rft import RFTRules, build_rft_dataset

        config = resolved.config
        stats = build_rft_dataset(
            [Path(r) for r in config["runs"]], Path(config["out"]), RFTRules(**config["rules"])
        )
        err_console.print(
            f"RFT set: kept {stats['kept']} of {stats['total']} trajectories -> {config['out']}"
        )
    if resolved.engine == "trl":
        _run_grpo(resolved)
        return
    if resolved.engine in ("verl", "verl-sft"):
        if importlib.util.find_spec("verl") is None:
            raise CudaAgentError(
                f"stage {resolved.stage} runs on verl, which is not installed here "
                f"(pip install verl=={VERL_VERSION}); --dry-run shows the command"
            )
        missing = [m for m in VERL_ADAPTERS if importlib.util.find_spec(m) is None]
        if resolved.engine == "verl" and missing:
            raise CudaAgentError(
                f"stage {resolved.stage} needs the verl agent-loop adapter, which this version "
                "does not have yet; --dry-run shows the command it will run"
            )
    for path, content in resolved.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content, encoding="utf-8")
    _write_datasets(resolved)
    command = list(resolved.command)
    if command[0] == "cuda-agent":
        command = [sys.executable, "-m", "cuda_agent", *command[1:]]
    err_console.print(f"running: {resolved.command[0]} ... ({resolved.stage})")
    code = subprocess.call(command)
    if code != 0:
        raise typer.Exit(code)


def _write_datasets(resolved: Plan) -> None:
    from cuda_agent.rl.verl.data import write_curriculum_dataset, write_verl_dataset

    for path, source in resolved.datasets.items():
        curriculum = source.get("curriculum")
        if curriculum:
            rows = write_curriculum_dataset(
                curriculum["task"],
                curriculum["folder"],
                curriculum["split"],
                Path(path),
                source["backend"],
                curriculum["size"],
            )
        else:
            rows = write_verl_dataset(
                source["problems"],
                Path(path),
                source["agentic"],
                source["backend"],
                source["size"],
            )
        err_console.print(f"verl dataset: {rows} problems from {source['problems']} -> {path}")


def _import_trl(stage: str) -> None:
    """Import TRL's trainers (``import_trainers``), or one line naming the install where TRL
    is missing."""
    if importlib.util.find_spec("trl") is None:
        raise CudaAgentError(
            f"stage {stage} runs on TRL, which is not installed here (pip install trl)"
        )
    from cuda_agent.rl.trl import import_trainers

    import_trainers()


def _run_curriculum_rft(resolved: Plan) -> None:
    _import_trl(resolved.stage)
    from cuda_agent.rl.trl.curriculum_rft import run_rft_options

    def log(message: str) -> None:
        err_console.print(message, markup=False, highlight=False)

    with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its logs: stdout is ours
        summary = run_rft_options(**resolved.engine_options, log=log)
    keys = ("replies", "base_pass_rate", "problems", "learnable", "examples", "outcomes")
    print_json(
        {k: summary[k] for k in keys}
        | {"model": summary["sft"]["model"], "steps": summary["sft"]["steps"]}
        | {"out": resolved.engine_options["out"]}
    )


def _run_grpo(resolved: Plan) -> None:
    _import_trl(resolved.stage)
    options = dict(resolved.engine_options)
    options["out"] = Path(options["out"])
    if "task" in options:  # a rung of the curriculum: single-turn
        from cuda_agent.rl.trl.single_turn import run_curriculum

        summary = run_curriculum(**options)
    else:
        from cuda_agent.rl.trl.grpo import run_grpo

        summary = run_grpo(**options)
    keys = ("steps", "rewards", "loss", "changed_params", "per_step")
    print_json({k: summary[k] for k in keys} | {"steps_file": str(options["out"] / "steps.jsonl")})
