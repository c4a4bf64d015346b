"""``cuda-agent serve``: run the local evaluation service (warm workers for ``eval`` and
``tool verify``) in the foreground until interrupted."""

from __future__ import annotations

import contextlib
import signal

import typer

from cuda_agent.cli.common import err_console, one_line_errors, resolve_backend


@one_line_errors
def serve_command(
    backend: str = typer.Option("auto", help="cpu, cuda, or auto (cuda when a GPU is visible)."),
    spare_workers: int = typer.Option(1, help="Started workers kept ready."),
) -> None:
    """Keep started evaluation workers ready: `eval` and `tool verify` use them while this
    runs (stop with Ctrl-C or SIGTERM)."""
    from cuda_agent.evaluator.service import EvalService

    chosen = resolve_backend(backend)
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
