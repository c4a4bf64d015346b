"""Output shared by the KernelBench-peer modes: JSON files, plain tables, the KernelBench log.

``output_to`` sends everything written to fds 1 and 2 (KernelBench's prints, nvcc, ninja) to
the log; ``jsonable`` / ``write_json`` write results atomically; ``ratio`` / ``positive`` read
KernelBench's numbers (-1.0 is "not measured"). Nothing here imports KernelBench or torch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def output_to(log_path: Path) -> Iterator[None]:
    """Send everything written to fds 1 and 2 (Python prints, nvcc, ninja) to log_path."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


def jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else str(obj)
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)


def write_json(path: Path | None, payload: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(jsonable(payload), indent=2) + "\n")
    tmp.replace(path)


def error_string(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


def positive(value: Any) -> float | None:
    """KB uses -1.0 for 'not measured'."""
    try:
        return float(value) if value is not None and float(value) > 0 else None
    except (TypeError, ValueError):
        return None


def ratio(num: Any, den: Any) -> float | None:
    try:
        if num is None or den is None or float(num) <= 0 or float(den) <= 0:
            return None
        return float(num) / float(den)
    except (TypeError, ValueError):
        return None


def fmt(value: Any, spec: str = ".4g") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return format(value, spec)
    return str(value)


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cells = [[fmt(c) for c in row] for row in rows]
    widths = [
        max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    print(line)
    print("-" * len(line))
    for row in cells:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def log_path(args: argparse.Namespace) -> Path:
    if args.log:
        path = Path(args.log)
    elif args.out:
        path = Path(str(args.out) + ".kb.log")
    else:
        path = Path(tempfile.mkstemp(prefix="kbpeer-", suffix=".log")[1])
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.resolve()
