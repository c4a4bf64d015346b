"""The static filters of the synthesiser: well-formed, not a duplicate, not a benchmark copy.

They run in the parent process, on the source text alone, before any execution:

* ``well_formed``: the problem parses and has ``Model``, ``get_inputs``, ``get_init_inputs``
  (the problem loader's own check);
* ``unique``: no earlier candidate has the same normalised AST (comments, docstrings and
  formatting ignored: an exact duplicate), nor the same *structure* (the same AST with every
  numeric constant masked: the same operators with other sizes, a near-duplicate);
* ``decontaminated``: the highest AST-token similarity to any problem of the benchmark set
  (``decontam.py``) is at most the threshold (0.9 by default, as the paper).

The execution filters (runs, deterministic, non-degenerate, runtime window, torch.compile)
are in the worker (``evaluator/worker/modes/synth_check.py``).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

from cuda_agent.core.errors import ProblemError
from cuda_agent.core.pyparse import parse_module
from cuda_agent.problems.source import check_problem_source
from cuda_agent.synth.decontam import Decontaminator

STATIC_FILTERS = ("well_formed", "unique", "decontaminated")
EXECUTION_FILTERS = (
    "runs_eager",
    "deterministic",
    "depends_on_inputs",
    "depends_on_weights",
    "non_degenerate",
    "runtime_window",
    "runs_compile",
)
ALL_FILTERS = ("composes", *STATIC_FILTERS, *EXECUTION_FILTERS)
DEFAULT_THRESHOLD = 0.9


@dataclass
class StaticVerdict:
    passed: bool
    filter: str = ""
    reason: str = ""
    similarity: float | None = None
    closest: str = ""


def exact_key(source: str) -> str:
    """Hash of the AST without docstrings: equal for sources that differ only in layout."""
    return _digest(_strip_docstrings(parse_module(source)))


def structure_key(source: str) -> str:
    """Hash of the AST with numeric constants masked: equal for the same ops at other sizes."""
    tree = _strip_docstrings(parse_module(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | complex):
            node.value = 0
    return _digest(tree)


@dataclass
class StaticFilters:
    """Applies the static filters in order and remembers what it has let through."""

    decontaminator: Decontaminator | None = None
    threshold: float = DEFAULT_THRESHOLD
    exact: dict[str, str] = field(default_factory=dict)
    structures: dict[str, str] = field(default_factory=dict)

    def check(self, candidate_id: str, source: str) -> StaticVerdict:
        try:
            check_problem_source(source, candidate_id)
        except ProblemError as err:
            return StaticVerdict(False, "well_formed", str(err))
        exact, structure = exact_key(source), structure_key(source)
        if exact in self.exact:
            return StaticVerdict(False, "unique", f"same code as {self.exact[exact]}")
        if structure in self.structures:
            return StaticVerdict(
                False, "unique", f"same structure as {self.structures[structure]} (sizes differ)"
            )
        verdict = StaticVerdict(True)
        if self.decontaminator is not None:
            match = self.decontaminator.best_match(source)
            verdict.similarity, verdict.closest = round(match.score, 4), match.closest or ""
            if match.score > self.threshold:
                verdict.passed, verdict.filter = False, "decontaminated"
                verdict.reason = (
                    f"AST similarity {match.score:.3f} to {match.closest} "
                    f"exceeds {self.threshold:g}"
                )
                return verdict
        self.remember(candidate_id, source)
        return verdict

    def remember(self, candidate_id: str, source: str) -> None:
        """Count ``source`` as seen (also used to rebuild the state when a run resumes)."""
        self.exact.setdefault(exact_key(source), candidate_id)
        self.structures.setdefault(structure_key(source), candidate_id)


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [ast.Pass()]
    return tree


def _digest(tree: ast.AST) -> str:
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()[:16]
