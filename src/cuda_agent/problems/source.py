"""Static checks and size rewriting of KernelBench-format problem sources (no execution).

A problem file must define ``class Model``, ``get_inputs()`` and ``get_init_inputs()`` at top
level. Sizes are module-level constants (``batch_size = 128``); ``apply_size_overrides`` rewrites
their literals in the text (comments and layout are kept), which is how bundled problems get
their small CPU size. Runtime validation (that ``get_inputs`` really returns tensors...) is done
by the worker in a subprocess: see ``evaluator.worker.modes.problem_check``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cuda_agent.core.errors import ProblemError
from cuda_agent.core.pyparse import parse_module

REQUIRED_FUNCTIONS = ("get_inputs", "get_init_inputs")


@dataclass(frozen=True)
class ProblemShape:
    """What a static read of a problem file found."""

    constants: dict[str, int | float]
    model_bases: tuple[str, ...]


def parse_python(source: str, label: str) -> ast.Module:
    """Parse ``source``; a syntax error becomes a one-line ProblemError with its line number."""
    try:
        return parse_module(source, filename=label)
    except SyntaxError as err:
        where = f"line {err.lineno}" + (f", column {err.offset}" if err.offset else "")
        raise ProblemError(f"{label}: syntax error at {where}: {err.msg}") from None


def check_problem_source(source: str, label: str) -> ProblemShape:
    """Check the KernelBench layout of ``source`` without running it."""
    tree = parse_python(source, label)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {
        n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if "Model" not in classes:
        raise ProblemError(f"{label}: no top-level `class Model` (a KernelBench problem needs one)")
    missing = [name for name in REQUIRED_FUNCTIONS if name not in functions]
    if missing:
        raise ProblemError(f"{label}: missing top-level function(s): {', '.join(missing)}")
    forward = [
        n for n in classes["Model"].body if isinstance(n, ast.FunctionDef) and n.name == "forward"
    ]
    if not forward:
        raise ProblemError(f"{label}: `class Model` has no `forward` method")
    bases = tuple(ast.unparse(b) for b in classes["Model"].bases)
    return ProblemShape(constants=size_constants(tree), model_bases=bases)


def size_constants(tree: ast.Module) -> dict[str, int | float]:
    """Top-level ``NAME = <int or float literal>`` assignments (the problem's size knobs)."""
    found: dict[str, int | float] = {}
    for node in tree.body:
        target = _constant_target(node)
        if target is not None:
            value = target[1].value
            assert isinstance(value, int | float)
            found[target[0]] = value
    return found


def apply_size_overrides(source: str, overrides: dict[str, int | float], label: str) -> str:
    """Return ``source`` with the literals of the named top-level constants replaced."""
    if not overrides:
        return source
    tree = parse_python(source, label)
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []
    seen: set[str] = set()
    for node in tree.body:
        target = _constant_target(node)
        if target is None or target[0] not in overrides:
            continue
        name, value_node = target
        seen.add(name)
        if value_node.lineno != value_node.end_lineno:
            raise ProblemError(f"{label}: constant {name} spans several lines; cannot resize it")
        assert value_node.end_col_offset is not None
        edits.append(
            (
                value_node.lineno - 1,
                value_node.col_offset,
                value_node.end_col_offset,
                repr(overrides[name]),
            )
        )
    unknown = sorted(set(overrides) - seen)
    if unknown:
        raise ProblemError(
            f"{label}: size override(s) {', '.join(unknown)} name no top-level constant"
        )
    for line_no, start, end, text in sorted(edits, reverse=True):
        line = lines[line_no]
        raw = line.encode("utf-8")
        lines[line_no] = (raw[:start] + text.encode("utf-8") + raw[end:]).decode("utf-8")
    return "".join(lines)


def _constant_target(node: ast.stmt) -> tuple[str, ast.Constant] | None:
    value: ast.expr | None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Constant):
        return None
    if isinstance(value.value, bool) or not isinstance(value.value, int | float):
        return None
    return target.id, value
