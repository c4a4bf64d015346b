"""Decontamination: how similar a problem's ``Model`` is to every problem of a benchmark.

Our own implementation of an AST similarity (the paper used "PythonASTSimilarity" with a 0.9
threshold). The ``Model`` class is turned into a token sequence by a depth-first walk of its
syntax tree: node types, plus the names of called functions and attributes (``conv2d``,
``relu``, ``Linear``: what the model computes), while local variable names, constants,
docstrings and formatting are dropped (a renamed or resized copy reads the same). Similarity is
the ``difflib`` ratio of two sequences (2 x matches / total length, in [0, 1]); a candidate's
score is its maximum over the benchmark. ``quick_ratio`` bounds skip hopeless pairs.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.core.pyparse import parse_module

KEPT_NAMES = {"torch", "nn", "F", "self", "super"}


def model_tokens(source: str) -> list[str]:
    """The ``Model`` class's token sequence (empty if the source has no such class)."""
    try:
        tree = parse_module(source)
    except SyntaxError:
        return []
    model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"), None)
    if model is None:
        return []
    tokens: list[str] = []
    _walk(model, tokens)
    return tokens


def _walk(node: ast.AST, tokens: list[str]) -> None:
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return  # docstrings
    if isinstance(node, ast.ClassDef):
        tokens.append("ClassDef")
    elif isinstance(node, ast.FunctionDef):
        tokens.append(f"def:{node.name}" if node.name in ("__init__", "forward") else "def")
    elif isinstance(node, ast.Attribute):
        tokens.append(f"attr:{node.attr}")
    elif isinstance(node, ast.Name):
        tokens.append(f"name:{node.id}" if node.id in KEPT_NAMES else "name")
    elif isinstance(node, ast.Constant):
        tokens.append("const")
    elif not isinstance(node, ast.expr_context | ast.arguments | ast.arg | ast.keyword):
        tokens.append(type(node).__name__)
    for child in ast.iter_child_nodes(node):
        _walk(child, tokens)


def similarity(a: list[str], b: list[str]) -> float:
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass
class Match:
    score: float
    closest: str | None


class Decontaminator:
    """The benchmark's token sequences, and a candidate's maximum similarity to them."""

    def __init__(self, benchmark: dict[str, str]) -> None:
        self.benchmark = {k: model_tokens(v) for k, v in benchmark.items()}
        self.benchmark = {k: v for k, v in self.benchmark.items() if v}

    @classmethod
    def from_problem_set(cls, spec: str) -> Decontaminator:
        from cuda_agent.problems.sets import load_problem_set

        return cls({p.id: p.source for p in load_problem_set(spec)})

    @classmethod
    def from_folder(cls, folder: Path) -> Decontaminator:
        return cls({p.stem: p.read_text() for p in sorted(folder.rglob("*.py"))})

    def best_match(self, source: str) -> Match:
        tokens = model_tokens(source)
        best = Match(0.0, None)
        for name, other in self.benchmark.items():
            matcher = difflib.SequenceMatcher(None, tokens, other, autojunk=False)
            if matcher.real_quick_ratio() <= best.score or matcher.quick_ratio() <= best.score:
                continue
            score = matcher.ratio()
            if score > best.score:
                best = Match(score, name)
        return best
