"""Shape variants of a problem: each size constant halved, doubled and set to an odd size.

A problem's sizes are its top-level integer constants (``batch_size = 16``). The constants that
matter are those ``get_inputs`` and ``get_init_inputs`` use, directly or through other
top-level names (a derived constant such as ``hidden = dim * 4``, or a helper function). Each
of them gives up to three variants, one constant changed at a time so that a failure names its
cause: halved, doubled, and an odd size (127 for constants above 127, else the next odd
number), which catches kernels that assume a multiple of their block size.

Static only (the AST; nothing is executed): whether a variant is valid for the reference and
fits in memory is decided by the worker (``evaluator/worker/modes/shape_plan.py``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from cuda_agent.problems.source import (
    REQUIRED_FUNCTIONS,
    apply_size_overrides,
    parse_python,
    size_constants,
)

ODD_SIZE = 127
MAX_VARIANTS = 24


@dataclass(frozen=True)
class SizeVariant:
    """One constant changed: ``label`` is ``"dim=512"``, ``kind`` halved, doubled or odd."""

    label: str
    kind: str
    name: str
    value: int
    source: str


def used_size_constants(source: str, label: str) -> dict[str, int]:
    """The integer constants that ``get_inputs`` / ``get_init_inputs`` reach, in file order."""
    tree = parse_python(source, label)
    constants = {name: value for name, value in size_constants(tree).items() if type(value) is int}
    definitions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            definitions[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    definitions[target.id] = node.value
    used: set[str] = set()
    seen: set[str] = set()
    todo = [name for name in REQUIRED_FUNCTIONS if name in definitions]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for sub in ast.walk(definitions[name]):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                if sub.id in constants:
                    used.add(sub.id)
                elif sub.id in definitions and sub.id != "Model":
                    todo.append(sub.id)
    return {name: value for name, value in constants.items() if name in used}


def variant_values(value: int) -> list[tuple[str, int]]:
    """``[(kind, new value), ...]`` for one constant, without repeats or the value itself."""
    odd = ODD_SIZE if value > ODD_SIZE else (value + 1 if value % 2 == 0 else value + 2)
    found: list[tuple[str, int]] = []
    for kind, new in (("halved", value // 2), ("doubled", value * 2), ("odd", odd)):
        if new >= 1 and new != value and new not in (v for _, v in found):
            found.append((kind, new))
    return found


def size_variants(
    source: str, label: str, limit: int = MAX_VARIANTS
) -> tuple[list[SizeVariant], int]:
    """The variants of ``source`` (at most ``limit``) and how many more there were."""
    variants: list[SizeVariant] = []
    for name, value in used_size_constants(source, label).items():
        if value < 1:
            continue
        for kind, new in variant_values(value):
            text = apply_size_overrides(source, {name: new}, label)
            variants.append(SizeVariant(f"{name}={new}", kind, name, new, text))
    return variants[:limit], max(0, len(variants) - limit)
