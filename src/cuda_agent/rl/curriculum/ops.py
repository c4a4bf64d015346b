"""The curriculum's operators: unary elementwise functions, each in PyTorch and in C.

Every ``ElementwiseOp`` writes one step of a problem twice: as a PyTorch expression (what
``Model.forward`` returns) and as a C expression over one ``float`` (what the fill-in task's
kernel computes per element, valid both in C++ with ``<math.h>`` and in CUDA device code:
``fmaxf``, ``expf``, ``tanhf``...). ``compose(seed)`` stacks 1 to 3 of them (some with a
constant drawn from the op's choices) into a ``Composition`` holding both expressions; the
C one is the reference answer of the fill-in task. Same seed, same composition.

The ops stay away from overflow on ``torch.randn`` inputs (no bare ``exp``; scales of at most
3), so outputs are finite and the evaluator's 1e-2 tolerance compares like with like.

What it does not do: check that both forms agree (a test compiles every reference answer and
compares it with PyTorch), or build problem files (``problem_set``).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

OP_COUNT_WEIGHTS = {1: 0.35, 2: 0.45, 3: 0.20}
_CALL = re.compile(r"^[A-Za-z_][\w.]*\(")


@dataclass(frozen=True)
class ElementwiseOp:
    """``torch`` and ``c`` are templates over ``{x}`` (the operand where any expression fits:
    a function argument), ``{px}`` (the operand where an operator binds it: parenthesised
    unless atomic) and ``{a}`` (the constant, one of ``constants``; ``{a}f`` in C)."""

    name: str
    torch: str
    c: str
    constants: tuple[float, ...] = ()


OPS: tuple[ElementwiseOp, ...] = (
    ElementwiseOp("relu", "torch.relu({x})", "fmaxf({x}, 0.0f)"),
    ElementwiseOp("abs", "torch.abs({x})", "fabsf({x})"),
    ElementwiseOp("neg", "-{px}", "-{px}"),
    ElementwiseOp("square", "torch.square({x})", "{px} * {px}"),
    ElementwiseOp("scale", "{px} * {a}", "{px} * {a}f", (0.5, 2.0, 3.0, -1.5)),
    ElementwiseOp("shift", "{px} + {a}", "{px} + {a}f", (1.0, 0.5, 0.25)),
    ElementwiseOp("sigmoid", "torch.sigmoid({x})", "1.0f / (1.0f + expf(-{px}))"),
    ElementwiseOp("tanh", "torch.tanh({x})", "tanhf({x})"),
    ElementwiseOp("sin", "torch.sin({x})", "sinf({x})"),
    ElementwiseOp("cos", "torch.cos({x})", "cosf({x})"),
    ElementwiseOp("erf", "torch.erf({x})", "erff({x})"),
    ElementwiseOp(
        "leaky_relu",
        "F.leaky_relu({x}, {a})",
        "({px} > 0.0f ? {px} : {a}f * {px})",
        (0.01, 0.1, 0.2),
    ),
    ElementwiseOp(
        "clamp", "torch.clamp({x}, -{a}, {a})", "fminf(fmaxf({x}, -{a}f), {a}f)", (0.5, 1.0, 2.0)
    ),
    ElementwiseOp("softplus", "F.softplus({x})", "log1pf(expf({x}))"),
    ElementwiseOp("silu", "F.silu({x})", "{px} / (1.0f + expf(-{px}))"),
    ElementwiseOp("softsign", "F.softsign({x})", "{px} / (1.0f + fabsf({x}))"),
    ElementwiseOp(
        "hardsigmoid", "F.hardsigmoid({x})", "fminf(fmaxf({px} / 6.0f + 0.5f, 0.0f), 1.0f)"
    ),
)
OPS_BY_NAME = {op.name: op for op in OPS}


@dataclass(frozen=True)
class Composition:
    steps: tuple[tuple[str, float | None], ...]  # (op name, constant or None), innermost first
    torch_expr: str
    c_expr: str

    @property
    def ops(self) -> list[str]:
        return [name for name, _ in self.steps]


def compose(seed: int) -> Composition:
    """1 to 3 ops drawn for ``seed`` (no op twice in a row), applied to ``x``."""
    rng = random.Random(f"curriculum:{seed}")
    count = rng.choices(list(OP_COUNT_WEIGHTS), weights=list(OP_COUNT_WEIGHTS.values()))[0]
    steps: list[tuple[str, float | None]] = []
    for _ in range(count):
        choices = [op for op in OPS if not steps or op.name != steps[-1][0]]
        op = rng.choice(choices)
        steps.append((op.name, rng.choice(op.constants) if op.constants else None))
    return apply_steps(tuple(steps))


def apply_steps(steps: tuple[tuple[str, float | None], ...]) -> Composition:
    """Both expressions of a stack of ops (innermost first) over ``x``."""
    torch_expr, c_expr = "x", "x"
    for name, constant in steps:
        op = OPS_BY_NAME[name]
        torch_expr = _fill(op.torch, torch_expr, constant)
        c_expr = _fill(op.c, c_expr, constant)
    return Composition(steps, torch_expr, c_expr)


def _fill(template: str, operand: str, constant: float | None) -> str:
    values = {"x": operand, "px": operand if atomic(operand) else f"({operand})"}
    if constant is not None:
        values["a"] = repr(float(constant))
    return template.format(**values)


def atomic(expr: str) -> bool:
    """Whether ``expr`` binds tighter than any operator: a name, a number, a call, or one
    parenthesised whole."""
    if re.fullmatch(r"[A-Za-z_]\w*|\d+(\.\d+)?f?", expr):
        return True
    if expr.startswith("("):
        start = 0
    elif _CALL.match(expr):
        start = expr.index("(")
    else:
        return False
    depth = 0
    for i, char in enumerate(expr[start:], start):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i == len(expr) - 1
    return False
