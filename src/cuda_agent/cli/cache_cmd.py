"""``cuda-agent cache show|prune|clear``: what the cache holds, and making it smaller.

``show`` prints each part of the cache root (``core/cache_usage.py``) with its size, entries
and last use, and the total; ``prune --max-size 5G`` removes whole entries, least recently
used first, until the cache holds at most that; ``clear --yes`` removes every entry. The root
is ``$CUDA_AGENT_CACHE`` or ``~/.cache/cuda-agent`` (the tests' is ``.cache/cuda-agent-tests``
in the repository: ``make clean-cache`` clears both).

``show`` also names the cap the cache keeps itself under (``CUDA_AGENT_CACHE_MAX``;
``core/cache_usage.keep_under_cap_once``: the first evaluation of a process prunes entries
unused for an hour or more).

What it does not do: prune while evaluations run (an entry removed under a build can fail it:
run it when nothing is evaluating).
"""

from __future__ import annotations

import time

import typer

from cuda_agent.cli.common import one_line_errors, out_console, print_json
from cuda_agent.core.cache_usage import (
    CAP_ENV,
    Entry,
    cache_cap,
    clear,
    human,
    parse_size,
    prune,
    usage,
)
from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import cache_root

app = typer.Typer(help="See the cache's size; prune or clear it.", no_args_is_help=True)
NOTE = "run prune or clear when nothing is evaluating (an entry removed under a build fails it)"


@app.command("show")
@one_line_errors
def show_command(as_json: bool = typer.Option(False, "--json", help="Print as JSON.")) -> None:
    """Each part of the cache with its size, entries and last use, and the total."""
    root = cache_root()
    parts = usage(root)
    total = sum(p.bytes for p in parts)
    cap = cache_cap()
    if as_json:
        rows = [
            {"part": p.part, "about": p.about, "bytes": p.bytes, "entries": p.entries,
             "oldest_use": p.oldest, "newest_use": p.newest}
            for p in parts
        ]  # fmt: skip
        print_json({"root": str(root), "bytes": total, "cap_bytes": cap, "parts": rows})
        return
    capped = f"cap {human(cap)}" if cap is not None else "no cap"
    out_console.print(
        f"cache {root}: {human(total)} ({capped}: {CAP_ENV})", markup=False, soft_wrap=True
    )
    for part in parts:
        if not part.entries:
            continue
        used = f"last used {_ago(part.newest)}, oldest {_ago(part.oldest)}"
        out_console.print(
            f"  {part.part:<14} {human(part.bytes):>9}  {part.entries:>5} entries  {used}",
            markup=False,
            soft_wrap=True,
        )
    out_console.print(
        "make it smaller: cuda-agent cache prune --max-size 5G (least recently used first), "
        f"or cuda-agent cache clear --yes; {NOTE}",
        markup=False,
        soft_wrap=True,
    )


@app.command("prune")
@one_line_errors
def prune_command(
    max_size: str = typer.Option(..., "--max-size", help="What the cache may keep: 5G, 500M."),
    as_json: bool = typer.Option(False, "--json", help="Print what was removed as JSON."),
) -> None:
    """Remove whole entries, least recently used first, until the cache holds at most
    --max-size."""
    try:
        limit = parse_size(max_size)
    except ValueError as err:
        raise CudaAgentError(f"--max-size: {err}") from None
    _report(prune(cache_root(), limit), as_json)


@app.command("clear")
@one_line_errors
def clear_command(
    yes: bool = typer.Option(False, "--yes", help="Really remove every entry."),
    as_json: bool = typer.Option(False, "--json", help="Print what was removed as JSON."),
) -> None:
    """Remove every entry of the cache (it is all made again when needed)."""
    if not yes:
        raise CudaAgentError(f"cache clear removes everything under {cache_root()}: add --yes")
    _report(clear(cache_root()), as_json)


def _report(removed: list[Entry], as_json: bool) -> None:
    freed = sum(e.bytes for e in removed)
    if as_json:
        print_json(
            {"removed": [{"part": e.part, "path": str(e.path), "bytes": e.bytes} for e in removed],
             "bytes": freed}
        )  # fmt: skip
        return
    out_console.print(
        f"removed {len(removed)} entries, {human(freed)} freed ({cache_root()})",
        markup=False,
        soft_wrap=True,
    )


def _ago(when: float | None) -> str:
    if when is None:
        return "never"
    seconds = max(0.0, time.time() - when)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"
