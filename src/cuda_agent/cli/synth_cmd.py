"""``cuda-agent synth``: synthesise a training dataset of fused-operator problems."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cuda_agent.cli.common import err_console, one_line_errors, out_console, resolve_backend
from cuda_agent.cli.pools import make_pool
from cuda_agent.cli.progress_log import Reporter
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.export import export_run
from cuda_agent.synth.filters import StaticFilters
from cuda_agent.synth.run import Composer, SynthConfig, SynthRun


@one_line_errors
def synth_command(
    out: Path = typer.Option(..., "--out", help="Run folder (verdicts.jsonl; reruns resume)."),
    n: int = typer.Option(100, "--n", help="Candidates to compose (seeds seed..seed+n-1)."),
    composer: str = typer.Option("programmatic", help="programmatic or llm."),
    max_ops: int = typer.Option(5, help="Most operators stacked in one problem (1-5)."),
    seed: int = typer.Option(0, help="First seed."),
    backend: str = typer.Option("auto", help="cpu, cuda, or auto."),
    decontaminate_against: str | None = typer.Option(
        None, help="A benchmark set (a KernelBench checkout, a folder, 'bundled')."
    ),
    threshold: float = typer.Option(0.9, help="Drop candidates more similar than this."),
    runtime_ms: str | None = typer.Option(
        None, help="Eager runtime window LO,HI in ms (default 1,100 on cuda; 0.01,50 on cpu)."
    ),
    transformers_share: float = typer.Option(
        0.0118, help="Share of seeds that become one transformers block (if installed)."
    ),
    batch_size: int = typer.Option(8, help="Candidates per worker process."),
    worker_slots: int = typer.Option(1, help="Worker processes sharing each device."),
    workers: int | None = typer.Option(None, help="Devices (default: every GPU)."),
    ray: str | None = typer.Option(None, help="Use Ray: 'local' or a cluster address."),
    model: str = typer.Option("", help="llm composer: model name at the endpoint."),
    base_url: str = typer.Option("", help="llm composer: OpenAI-compatible base URL."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", help="Variable holding the API key."),
    max_output_tokens: int = typer.Option(4096, help="llm composer: output cap per reply."),
    export_only: bool = typer.Option(False, help="Only export the run folder again."),
) -> None:
    """Compose candidates, filter them on the evaluation pool, export the dataset."""
    if not export_only:
        chosen = resolve_backend(backend)
        config = SynthConfig(
            n=n,
            composer=composer,
            seed=seed,
            max_ops=max_ops,
            backend=chosen,
            runtime_ms=_window(runtime_ms),
            decontaminate_against=decontaminate_against,
            threshold=threshold,
            batch_size=batch_size,
            model=model or None,
            transformers_share=transformers_share,
        )
        _validate(config)
        if max_output_tokens < 1:
            raise CudaAgentError("--max-output-tokens must be at least 1")
        key = os.environ.get(api_key_env, "")
        make_composer = _composer(config, base_url, key, max_output_tokens)
        filters = StaticFilters(threshold=threshold)
        if decontaminate_against:
            err_console.print(f"reading the benchmark set {decontaminate_against} ...")
            filters.decontaminator = Decontaminator.from_problem_set(decontaminate_against)
        pool = make_pool(chosen, workers, ray, worker_slots)
        with pool, Reporter("synth", n, pool.board) as reporter:
            accepted = 0

            def on_verdict(verdict: dict[str, Any], finished: int, total: int) -> None:
                nonlocal accepted
                accepted += bool(verdict.get("accepted"))
                outcome = (
                    "accepted"
                    if verdict.get("accepted")
                    else f"rejected by {verdict.get('filter')}: {str(verdict.get('reason'))[:120]}"
                )
                reporter.finished(
                    f"{verdict.get('id')}: {outcome}", f"accepted {accepted} (this session)"
                )

            SynthRun(config, out, pool, make_composer, filters, on_verdict).run()
    stats = export_run(out)
    _print_stats(stats)
    out_console.print(f"dataset: {out / 'dataset.jsonl'}; statistics: {out / 'stats.json'}")


def _window(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise CudaAgentError(f"--runtime-ms {text!r}: expected LO,HI in ms, e.g. 1,100") from None
    if not 0 <= lo < hi:
        raise CudaAgentError(f"--runtime-ms {text!r}: need 0 <= LO < HI")
    return lo, hi


def _validate(config: SynthConfig) -> None:
    if config.n < 1:
        raise CudaAgentError("--n must be at least 1")
    if not 1 <= config.max_ops <= 5:
        raise CudaAgentError("--max-ops must be between 1 and 5")
    if config.composer not in ("programmatic", "llm"):
        raise CudaAgentError(f"--composer {config.composer!r}: choose programmatic or llm")
    if config.composer == "llm" and not config.model:
        raise CudaAgentError("the llm composer needs --model (and --base-url)")
    if not 0 < config.threshold <= 1:
        raise CudaAgentError("--threshold must be in (0, 1]")
    if not 0 <= config.transformers_share <= 1:
        raise CudaAgentError("--transformers-share must be in [0, 1]")


def _composer(config: SynthConfig, base_url: str, api_key: str, max_tokens: int = 4096) -> Composer:
    from cuda_agent.synth.compose import ScaleProfile, compose  # imports torch: only when used

    scale = ScaleProfile.named("gpu" if config.backend == "cuda" else "cpu")
    if config.composer == "programmatic":
        return functools.partial(
            compose,
            max_ops=config.max_ops,
            scale=scale,
            transformers_share=config.transformers_share,
        )
    from cuda_agent.agent.models import OpenAIChatModel
    from cuda_agent.synth.llm_compose import LLMComposer

    llm = LLMComposer(
        OpenAIChatModel(str(config.model), base_url, api_key),
        backend=config.backend,
        runtime_ms=config.window(),
        max_ops=config.max_ops,
        max_tokens=max_tokens,
    )
    return llm.compose


def _print_stats(stats: dict[str, Any]) -> None:
    table = Table(title=f"{stats['accepted']} of {stats['candidates']} candidates accepted")
    for column in ("filter", "reached", "rejected", "pass rate"):
        table.add_column(column, justify="left" if column == "filter" else "right")
    for row in stats["filters"]:
        rate = row["pass_rate"]
        table.add_row(
            row["filter"],
            str(row["reached"]),
            str(row["rejected"]),
            "-" if rate is None else f"{rate:.1%}",
        )
    out_console.print(table)
    shares = ", ".join(
        f"{k} {v['share']:.1%}" for k, v in stats["composition"].items() if v["count"]
    )
    out_console.print(f"composition: {shares or 'nothing accepted'}")
    throughput = stats["throughput"]
    if throughput.get("accepted_per_minute") is not None:
        out_console.print(f"throughput: {throughput['accepted_per_minute']} accepted / minute")
