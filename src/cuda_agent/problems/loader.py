"""Load one problem file into a ``Problem`` record (static checks only, nothing is executed)."""

from __future__ import annotations

from pathlib import Path

from cuda_agent.core.errors import ProblemError
from cuda_agent.core.hashing import normalise_text, text_hash
from cuda_agent.core.pyparse import parse_module
from cuda_agent.core.types import Problem, Tolerance
from cuda_agent.problems.source import apply_size_overrides, check_problem_source

SIZES = ("standard", "small")
DEFAULT_TOLERANCE = Tolerance()


def read_text(path: Path) -> str:
    if not path.exists():
        raise ProblemError(f"{path}: no such file")
    if not path.is_file():
        raise ProblemError(f"{path}: not a file")
    try:
        return normalise_text(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ProblemError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def load_problem_file(
    path: Path,
    *,
    problem_id: str | None = None,
    level: int | None = None,
    tags: tuple[str, ...] = (),
    set_name: str = "file",
    size: str = "standard",
    small_overrides: dict[str, int | float] | None = None,
    description: str = "",
    tolerance: Tolerance = DEFAULT_TOLERANCE,
) -> Problem:
    """Read and statically check ``path``; apply the small-size overrides if ``size == "small"``."""
    if size not in SIZES:
        raise ProblemError(f"unknown problem size {size!r} (choose from {', '.join(SIZES)})")
    path = Path(path)
    label = str(path)
    source = read_text(path)
    check_problem_source(source, label)
    if size == "small" and small_overrides:
        source = apply_size_overrides(source, small_overrides, label)
    return Problem(
        id=problem_id or path.stem,
        path=path.resolve(),
        source=source,
        content_hash=text_hash(source),
        level=level if level is not None else infer_level(path),
        tags=tags,
        set_name=set_name,
        size=size,
        tolerance=tolerance,
        description=description or first_docstring_line(source),
    )


def infer_level(path: Path) -> int | None:
    """``.../level2/foo.py`` -> 2 (KernelBench's layout); otherwise None."""
    name = path.parent.name.lower()
    if name.startswith("level") and name[5:].isdigit():
        return int(name[5:])
    return None


def first_docstring_line(source: str) -> str:
    import ast

    try:
        doc = ast.get_docstring(parse_module(source))
    except SyntaxError:
        return ""
    return doc.strip().splitlines()[0] if doc else ""
