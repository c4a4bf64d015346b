"""The ``chain`` family's problems: fused elementwise chains of 3 to 5 ops of ``ops.OPS``.

``compose_chain(seed)`` stacks 3 to 5 ops (no op twice in a row, constants drawn from each
op's choices) into an ``ops.Composition``, like ``ops.compose`` does with 1 to 3, and keeps
only a chain that passes ``screen``: evaluated in Python (``PY``: each op's value, as PyTorch
computes it) over 1024 ``randn`` samples and a grid up to +-6.5 (beyond any ``torch.randn``
draw the evaluator makes),

* no value on the way exceeds ``MAX_MAGNITUDE`` and no ``softplus`` sees more than
  ``SOFTPLUS_LIMIT`` (its C form, ``log1pf(expf(x))``, overflows past 88 where PyTorch's
  returns x), so the C expression computes what PyTorch does;
* neither zeros nor the chain's own mean would pass the evaluator's 1e-2 tolerance on more
  than 90% of the samples (five squashing ops can leave an almost constant output);
* the C expression (the fill-in task's answer) is at most ``MAX_ANSWER_CHARS`` long (``square``
  writes its operand twice, so nested squares grow it fast).

A chain that fails is drawn again from the same random stream: same seed, same chain.

What it does not do: build problem files (``problem_set``), or prove the screen's sampling
exhaustive (a test compiles every reference answer of a set and compares it with PyTorch).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from cuda_agent.rl.curriculum.ops import OPS, Composition, apply_steps

CHAIN_COUNT_WEIGHTS = {3: 0.4, 4: 0.35, 5: 0.25}
MAX_MAGNITUDE = 1e4
SOFTPLUS_LIMIT = 80.0
MAX_ANSWER_CHARS = 300
MAX_DRAWS = 1000
TOLERANCE = 1e-2  # the evaluator's default atol = rtol
MAX_TRIVIAL_SHARE = 0.9

_rng = random.Random(0)
SAMPLES = tuple(_rng.gauss(0.0, 1.0) for _ in range(1024))
GRID = tuple(i / 10 for i in range(-65, 66))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


PY: dict[str, Callable[[float, float], float]] = {
    "relu": lambda x, a: max(x, 0.0),
    "abs": lambda x, a: abs(x),
    "neg": lambda x, a: -x,
    "square": lambda x, a: x * x,
    "scale": lambda x, a: x * a,
    "shift": lambda x, a: x + a,
    "sigmoid": lambda x, a: _sigmoid(x),
    "tanh": lambda x, a: math.tanh(x),
    "sin": lambda x, a: math.sin(x),
    "cos": lambda x, a: math.cos(x),
    "erf": lambda x, a: math.erf(x),
    "leaky_relu": lambda x, a: x if x > 0 else a * x,
    "clamp": lambda x, a: min(max(x, -a), a),
    "softplus": lambda x, a: math.log1p(math.exp(x)) if x < 20 else x,
    "silu": lambda x, a: x * _sigmoid(x),
    "softsign": lambda x, a: x / (1.0 + abs(x)),
    "hardsigmoid": lambda x, a: min(max(x / 6.0 + 0.5, 0.0), 1.0),
}


def compose_chain(seed: int) -> Composition:
    """3 to 5 ops drawn for ``seed`` (no op twice in a row) that pass ``screen``."""
    rng = random.Random(f"curriculum-chain:{seed}")
    for _ in range(MAX_DRAWS):
        count = rng.choices(list(CHAIN_COUNT_WEIGHTS), weights=list(CHAIN_COUNT_WEIGHTS.values()))
        steps: list[tuple[str, float | None]] = []
        for _ in range(count[0]):
            choices = [op for op in OPS if not steps or op.name != steps[-1][0]]
            op = rng.choice(choices)
            steps.append((op.name, rng.choice(op.constants) if op.constants else None))
        composition = apply_steps(tuple(steps))
        if screen(composition):
            return composition
    raise RuntimeError(f"compose_chain({seed}): no chain passed the screen")  # pragma: no cover


def screen(composition: Composition) -> bool:
    """Whether the chain is finite, its C form faithful, and its output not trivial (see the
    module docstring)."""
    if len(composition.c_expr) > MAX_ANSWER_CHARS:
        return False
    values: list[float] = []
    for x in SAMPLES + GRID:
        value = _evaluate(composition.steps, x)
        if value is None:
            return False
        values.append(value)
    outputs = values[: len(SAMPLES)]
    mean = sum(outputs) / len(outputs)
    for constant in (0.0, mean):
        close = sum(abs(v - constant) <= TOLERANCE + TOLERANCE * abs(v) for v in outputs)
        if close > MAX_TRIVIAL_SHARE * len(outputs):
            return False
    return True


def _evaluate(steps: tuple[tuple[str, float | None], ...], x: float) -> float | None:
    """The chain at ``x``, or None where a value on the way leaves the screen's bounds."""
    for name, constant in steps:
        if name == "softplus" and x > SOFTPLUS_LIMIT:
            return None
        x = PY[name](x, constant if constant is not None else 0.0)
        if not abs(x) <= MAX_MAGNITUDE:  # also NaN
            return None
    return x
