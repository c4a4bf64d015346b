"""``cuda-agent serve``: the local evaluation service (warm workers for ``eval`` and ``tool
verify`` on this machine), or with ``--http HOST:PORT`` the reward as an HTTP service for
trainers on other machines (docs/service.md); in the foreground until interrupted."""

from __future__ import annotations

import contextlib
import signal
from pathlib import Path

import typer

from cuda_agent.cli.common import err_console, one_line_errors, require_positive, resolve_backend
from cuda_agent.core.errors import ConfigError
from cuda_agent.core.paths import cache_root


@one_line_errors
def serve_command(
    backend: str = typer.Option("auto", help="cpu, cuda, or auto (cuda when a GPU is visible)."),
    spare_workers: int = typer.Option(1, help="Started workers kept ready."),
    http: str | None = typer.Option(
        None, "--http", help="HOST:PORT: serve the HTTP API there (docs/service.md)."
    ),
    token_env: str | None = typer.Option(
        None,
        "--token-env",
        help="An environment variable holding the bearer token(s), comma-separated, one per "
        "tenant (needed to listen beyond the loopback).",
    ),
    db: Path | None = typer.Option(
        None, "--db", help="The job store (default: $CUDA_AGENT_CACHE/service/jobs.sqlite)."
    ),
    ray: str | None = typer.Option(None, "--ray", help="'local' or a Ray address: a RayPool."),
    workers: int | None = typer.Option(None, help="Devices (GPUs or CPU slots) to use."),
    build_workers: int | None = typer.Option(None, help="Concurrent builds (CPU)."),
    jobs_per_gpu: int = typer.Option(1, "--jobs-per-gpu", help="Jobs sharing each device."),
) -> None:
    """Keep evaluation workers ready for this machine's `eval` and `tool verify`, or with
    --http serve the reward to trainers over HTTP (stop with Ctrl-C or SIGTERM)."""
    require_positive(workers=workers, build_workers=build_workers, jobs_per_gpu=jobs_per_gpu)
    chosen = resolve_backend(backend)
    if http is not None:
        _serve_http(chosen, http, token_env, db, ray, workers, build_workers, jobs_per_gpu)
        return
    from cuda_agent.evaluator.service import EvalService

    with EvalService(chosen, spare_depth=spare_workers) as service:
        # SIGTERM ends it as Ctrl-C does: the handler runs on this thread, inside
        # serve_forever(), so it must not call shutdown() (which waits for serve_forever)
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        err_console.print(
            f"evaluation service ({chosen}, isolation {service.isolation}) listening on "
            f"{service.path}"
        )
        with contextlib.suppress(KeyboardInterrupt):
            service.serve_forever()
    err_console.print(f"evaluation service stopped after {service.served} evaluation(s)")


def _serve_http(
    backend: str,
    http: str,
    token_env: str | None,
    db: Path | None,
    ray: str | None,
    workers: int | None,
    build_workers: int | None,
    jobs_per_gpu: int,
) -> None:
    try:
        from cuda_agent.service import server
        from cuda_agent.service.auth import Tokens, check_bind
    except ImportError as err:
        raise ConfigError(
            f"the HTTP service needs fastapi and uvicorn ({err.name} is missing): "
            "pip install 'cuda-agent[service]'"
        ) from None
    from cuda_agent.cli.pools import make_pool
    from cuda_agent.evaluator.options import EvalOptions

    try:
        address = server.parse_address(http)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    tokens = Tokens.from_env(token_env)
    check_bind(address[0], tokens)  # before any worker starts
    sock = server.listen(address)  # a port in use: one line, exit 2, before the workers
    try:
        pool = make_pool(
            backend, workers, ray, build_workers=build_workers, jobs_per_device=jobs_per_gpu
        )
    except BaseException:
        sock.close()
        raise
    base = EvalOptions(backend=backend, keep_spare_worker=True).validate()
    with pool:
        server.run(
            pool,
            backend,
            str(getattr(pool, "isolation", "")),
            tokens,
            sock,
            db or cache_root() / "service" / "jobs.sqlite",
            base,
            say=lambda line: err_console.print(line, highlight=False, soft_wrap=True),
        )
    err_console.print(
        "reward service stopped; unfinished jobs stay in the store for the next start"
    )
