"""Shared CLI plumbing: consoles, option parsing, one-line errors, backend resolution."""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.console import Console

from cuda_agent.core.errors import CudaAgentError

if TYPE_CHECKING:
    from cuda_agent.evaluator.options import EvalOptions

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)
F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


@dataclass(frozen=True)
class EvalArgs:
    """One ``cuda-agent eval`` as given: the problem (a bundled id or a file), the solution's
    path, the backend and size asked for (each may be ``auto``), the options, and ``quiet``
    (no status line, as for ``--json``)."""

    problem: str
    solution: Path
    backend: str
    size: str
    opts: EvalOptions
    quiet: bool


def print_command_line(console: Console, text: str) -> None:
    """A line that holds a command to copy: never broken by rich (it breaks lines at 80 columns
    when output is not a terminal, and a copied command then breaks in two); a terminal may
    still fold it on screen."""
    console.print(text, soft_wrap=True, markup=False)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    """Print one error line (no traceback) and return the Exit to raise."""
    err_console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)
    return typer.Exit(code)


def one_line_errors(fn: F) -> F:
    """Turn our input errors into one line + exit 2, anything else into one line + exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except CudaAgentError as err:
            raise fail(str(err)) from None
        except Exception as err:
            if os.environ.get("CUDA_AGENT_DEBUG"):
                raise
            raise fail(
                f"internal error: {type(err).__name__}: {err} "
                "(set CUDA_AGENT_DEBUG=1 for a traceback)",
                EXIT_INTERNAL,
            ) from None

    return wrapper  # type: ignore[return-value]


def resolve_backend(backend: str, need_device: bool = True) -> str:
    """``cpu``, ``cuda`` or ``auto`` (cuda when a GPU is visible) -> the backend to use.

    ``need_device``: ``cuda`` is refused at once (one line, exit 2) where torch sees no GPU,
    before anything is built; False where this process only prepares files (a workspace) or a
    remote service evaluates.
    """
    if backend not in ("cpu", "cuda", "auto"):
        raise CudaAgentError(f"unknown backend {backend!r} (choose from auto, cpu, cuda)")
    if backend == "cpu" or (backend == "cuda" and not need_device):
        return backend
    import torch

    visible = bool(torch.cuda.is_available())
    if backend == "auto":
        return "cuda" if visible else "cpu"
    if not visible:
        raise CudaAgentError(NO_GPU_MESSAGE)
    return backend


NO_GPU_MESSAGE = (
    "--backend cuda: no CUDA GPU is visible to torch here (torch.cuda.is_available() is False); "
    "use --backend cpu (or auto)"
)


def require_positive(**values: float | None) -> None:
    """Refuse (one line, exit 2 under ``one_line_errors``) a numeric option that is not a finite
    number > 0; None means not given. Keyword names are the options' (``max_turns``)."""
    for name, value in values.items():
        if value is not None and not 0 < value < float("inf"):
            option = "--" + name.replace("_", "-")
            raise CudaAgentError(f"{option} must be a number > 0 (got {value:g})")


def require_http_url(option: str, value: str) -> None:
    """Refuse (one line, exit 2) an endpoint URL that is given but not ``http(s)://HOST...``
    (a placeholder such as ``URL`` left in a copied command)."""
    from urllib.parse import urlparse

    if not value:
        return
    parsed = urlparse(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise CudaAgentError(
            f"{option} {value!r}: not an http(s) URL (e.g. http://localhost:8000/v1)"
        )


def resolve_size(size: str, backend: str) -> str:
    if size == "auto":
        return "small" if backend == "cpu" else "standard"
    if size not in ("small", "standard"):
        raise CudaAgentError(f"unknown size {size!r} (choose from auto, small, standard)")
    return size


def parse_csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def parse_levels(value: str | None) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(v) for v in parse_csv(value))
    except ValueError:
        raise CudaAgentError(f"--levels expects numbers like 1,2,3 (got {value!r})") from None


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()
