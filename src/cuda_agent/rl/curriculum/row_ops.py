"""The curriculum's row operators: row-wise maps and reductions over the last dim of a 2-D x.

A ``RowOp`` is one of the ``rowwise`` family's ops (softmax rescaled by the row length, so
that its values are O(1) like the others' rather than below the evaluator's 1e-2 absolute
tolerance; log_softmax; layer norm without affine; RMS norm; L2 normalize: y has x's shape,
each row of y from the same row of x) or of the ``reduction`` family's (sum, mean, amax, amin,
sum of squares, L2 norm over ``dim=-1``, no keepdim: one value per row), written as a PyTorch
template over ``{x}`` like ``ops.ElementwiseOp``.

``draw_row(family, seed)`` draws one such op with elementwise ops of ``ops.OPS`` around it
(``PRE_COUNTS``: 0 to 2 applied to x first; ``POST_COUNTS``: for row-wise ops, 0 or 1 applied
to the result; at most ``MAX_ELEMENTWISE`` in all: with one op, the families are too small
for held-out problems that no train problem resembles) into a ``RowProblem``, and keeps only
a problem that passes ``screen``: PyTorch evaluates it on a fixed ``randn`` input of the
problems' row length, and the output must be finite and neither zeros nor its own mean may
pass the evaluator's 1e-2 tolerance on more than 90% of its elements (``amax(tanh(x))`` is
1.0 in every row, ``relu(log_softmax(x))`` is all zeros). ``SKIP`` leaves out the pairs
whose C form (``ops.OPS``' ``c``, which the reference kernels use) would differ from
PyTorch's: ``softplus`` after the rescaled softmax, whose values pass 88, where
``log1pf(expf(x))`` overflows. Reductions get no op after them: an elementwise op of a sum of
1024 values would turn the sum's rounding into errors beyond the tolerance. A problem that
fails is drawn again from the same random stream: same family and seed, same problem.

What it does not do: write C (``reference`` writes the kernels), or build problem files
(``problem_set``).
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from typing import Any

from cuda_agent.rl.curriculum.ops import OPS, OPS_BY_NAME, _fill

Step = tuple[str, float | None]
PRE_COUNTS = {
    "rowwise": {0: 0.3, 1: 0.45, 2: 0.25},
    "reduction": {0: 0.15, 1: 0.5, 2: 0.35},
}
POST_COUNTS = {"rowwise": {0: 0.6, 1: 0.4}, "reduction": {0: 1.0}}
MAX_ELEMENTWISE = 2
MAX_DRAWS = 1000
SCREEN_SHAPE = (128, 1024)  # rows x cols of the screen's input: the problems' row length
TOLERANCE = 1e-2  # the evaluator's default atol = rtol
MAX_TRIVIAL_SHARE = 0.9


@dataclass(frozen=True)
class RowOp:
    """``torch``: a template over ``{x}`` / ``{px}`` (the operand, as in ``ops``), with
    ``x`` itself where it needs the row length (``x.shape[-1]``)."""

    name: str
    family: str  # "rowwise" (y has x's shape) or "reduction" (y has one value per row)
    torch: str


ROW_OPS: tuple[RowOp, ...] = (
    RowOp("softmax", "rowwise", "torch.softmax({x}, dim=-1) * x.shape[-1]"),
    RowOp("log_softmax", "rowwise", "torch.log_softmax({x}, dim=-1)"),
    RowOp("layer_norm", "rowwise", "F.layer_norm({x}, (x.shape[-1],))"),
    RowOp("rms_norm", "rowwise", "F.rms_norm({x}, (x.shape[-1],), eps=1e-05)"),
    RowOp("l2_normalize", "rowwise", "F.normalize({x}, dim=-1)"),
    RowOp("sum", "reduction", "torch.sum({x}, dim=-1)"),
    RowOp("mean", "reduction", "torch.mean({x}, dim=-1)"),
    RowOp("amax", "reduction", "torch.amax({x}, dim=-1)"),
    RowOp("amin", "reduction", "torch.amin({x}, dim=-1)"),
    RowOp("sum_squares", "reduction", "torch.sum(torch.square({x}), dim=-1)"),
    RowOp("l2_norm", "reduction", "torch.linalg.vector_norm({x}, dim=-1)"),
)
ROW_OPS_BY_NAME = {op.name: op for op in ROW_OPS}
# (row op, "post", elementwise op): C forms that would not compute what PyTorch does.
SKIP: frozenset[tuple[str, str, str]] = frozenset({("softmax", "post", "softplus")})


@dataclass(frozen=True)
class RowProblem:
    family: str
    op: str  # a ROW_OPS name
    pre: tuple[Step, ...]  # elementwise steps applied to x first, innermost first
    post: tuple[Step, ...]  # elementwise steps applied to the row op's result
    torch_expr: str

    @property
    def ops(self) -> list[str]:
        """Every op's name, innermost first (``["tanh", "softmax"]``)."""
        return [name for name, _ in self.pre] + [self.op] + [name for name, _ in self.post]


def row_ops(family: str) -> list[RowOp]:
    return [op for op in ROW_OPS if op.family == family]


def build_row(op: str, pre: tuple[Step, ...] = (), post: tuple[Step, ...] = ()) -> RowProblem:
    """The problem of ``op`` with the elementwise ``pre`` and ``post`` steps."""
    row_op = ROW_OPS_BY_NAME[op]
    expr = "x"
    for name, constant in pre:
        expr = _fill(OPS_BY_NAME[name].torch, expr, constant)
    expr = _fill(row_op.torch, expr, None)
    for name, constant in post:
        expr = _fill(OPS_BY_NAME[name].torch, expr, constant)
    return RowProblem(row_op.family, op, pre, post, expr)


def draw_row(family: str, seed: int) -> RowProblem:
    """One row op of ``family`` for ``seed`` with its elementwise ops (see the module
    docstring), screened."""
    rng = random.Random(f"curriculum-{family}:{seed}")
    for _ in range(MAX_DRAWS):
        op = rng.choice(row_ops(family))
        pre = _steps(rng, _count(rng, PRE_COUNTS[family]), op.name, "pre")
        room = MAX_ELEMENTWISE - len(pre)
        post = _steps(rng, min(room, _count(rng, POST_COUNTS[family])), op.name, "post")
        problem = build_row(op.name, pre, post)
        if screen(problem.torch_expr):
            return problem
    raise RuntimeError(
        f"draw_row({family!r}, {seed}): nothing passed the screen"
    )  # pragma: no cover


@functools.lru_cache(maxsize=4096)
def screen(torch_expr: str) -> bool:
    """Whether the expression's output on the screen's input is finite and not trivial."""
    import torch
    import torch.nn.functional as F

    x = _screen_input()
    with torch.no_grad():
        y = eval(torch_expr, {"torch": torch, "F": F, "x": x})  # our own text
    if not bool(torch.isfinite(y).all()):
        return False
    magnitude = y.abs()
    bound = TOLERANCE + TOLERANCE * magnitude
    zeros_pass = float((magnitude <= bound).float().mean())
    mean_passes = float(((y - y.mean()).abs() <= bound).float().mean())
    return max(zeros_pass, mean_passes) <= MAX_TRIVIAL_SHARE


@functools.cache
def _screen_input() -> Any:
    import torch

    return torch.randn(*SCREEN_SHAPE, generator=torch.Generator().manual_seed(0))


def _count(rng: random.Random, weights: dict[int, float]) -> int:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _steps(rng: random.Random, count: int, op: str, place: str) -> tuple[Step, ...]:
    steps: list[Step] = []
    for _ in range(count):
        choices = [
            e
            for e in OPS
            if (op, place, e.name) not in SKIP and (not steps or e.name != steps[-1][0])
        ]
        chosen = rng.choice(choices)
        steps.append((chosen.name, rng.choice(chosen.constants) if chosen.constants else None))
    return tuple(steps)
