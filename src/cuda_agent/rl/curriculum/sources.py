"""The curriculum's problem files: the KernelBench-format source of a drawn problem.

``problem_source(problem_id, candidate, size)`` writes the file of a problem (``families.draw``
drew ``candidate``; its family is the id's): a docstring naming the problem, ``batch_size`` and
``dim`` (``sizes(family)[size]``), a ``Model`` whose ``forward`` is the one line
``return <torch_expr>`` (``tasks.torch_expression`` reads it back), and ``get_inputs``:
``torch.randn(batch_size, dim)``. Elementwise and chain problems share one template
(``PROBLEM_TEMPLATE``, the one the curriculum always had); row-wise and reduction problems say
what y holds. ``catalogue_key()`` is everything here and in the draws that decides which
problems a spec gets, for the problem set's digest.

What it does not do: draw problems (``families``), or filter and split them
(``problem_set``).
"""

from __future__ import annotations

from typing import Any

from cuda_agent.rl.curriculum.chains import (
    CHAIN_COUNT_WEIGHTS,
    MAX_ANSWER_CHARS,
    MAX_MAGNITUDE,
    SOFTPLUS_LIMIT,
)
from cuda_agent.rl.curriculum.families import Candidate, family_of, kernel_name
from cuda_agent.rl.curriculum.ops import OPS
from cuda_agent.rl.curriculum.row_ops import (
    MAX_ELEMENTWISE,
    MAX_TRIVIAL_SHARE,
    POST_COUNTS,
    PRE_COUNTS,
    ROW_OPS,
    SCREEN_SHAPE,
    SKIP,
)

SIZES = {"small": (256, 1024), "standard": (8192, 8192)}  # (batch_size, dim) of x
# Row-wise and reduction problems keep 1024 columns at both sizes: over longer rows a sum or
# a norm varies by less than the evaluator's 1e-2 relative tolerance from row to row, and
# softmax's values sink below its 1e-2 absolute one.
ROW_SIZES = {"small": (256, 1024), "standard": (65536, 1024)}

TEMPLATE = '''\
"""Curriculum problem {id}: y = {torch_expr}, {title}.

{about}
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = {batch_size}
dim = {dim}


class Model(nn.Module):
    """{model_doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {torch_expr}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''
_OVER = "{n_ops} operator(s) ({ops}) over"
TEXTS = {  # per kernel: (title, about, Model's docstring)
    "elementwise": (
        "elementwise",
        f"{_OVER} a 2-D float32 tensor of {{batch_size}} x {{dim}}.",
        "y = {torch_expr}, for every element x.",
    ),
    "rowwise": (
        "row-wise",
        f"{_OVER} each row of a 2-D float32 tensor of {{batch_size}} x {{dim}}:\n"
        "y has the shape of x.",
        "y = {torch_expr}: each row of y from the same row of x.",
    ),
    "reduce": (
        "reduced over the last dim",
        f"{_OVER} each row of a 2-D float32 tensor of {{batch_size}} x {{dim}}:\n"
        "y has one value per row ({batch_size}).",
        "y = {torch_expr}: one value per row of x.",
    ),
}
PROBLEM_TEMPLATES = {
    kind: TEMPLATE.replace("{title}", title)
    .replace("{about}", about)
    .replace("{model_doc}", model_doc)
    for kind, (title, about, model_doc) in TEXTS.items()
}
PROBLEM_TEMPLATE = PROBLEM_TEMPLATES["elementwise"]


def sizes(family: str) -> dict[str, tuple[int, int]]:
    """The (batch_size, dim) of x per size for ``family``'s problems."""
    return SIZES if kernel_name(family) == "elementwise" else ROW_SIZES


def problem_source(problem_id: str, candidate: Candidate, size: str) -> str:
    family = family_of(problem_id)
    batch_size, dim = sizes(family)[size]
    return PROBLEM_TEMPLATES[kernel_name(family)].format(
        id=problem_id,
        torch_expr=candidate.torch_expr,
        n_ops=len(candidate.ops),
        ops=", ".join(candidate.ops),
        batch_size=batch_size,
        dim=dim,
    )


def catalogue_key() -> list[Any]:
    """What decides the problems drawn for a seed: the ops, the draws' weights and screens,
    the templates and sizes (JSON-serialisable)."""
    ops = [(op.name, op.torch, op.c, op.constants) for op in OPS]
    rows = [(op.name, op.family, op.torch) for op in ROW_OPS]
    chains = [CHAIN_COUNT_WEIGHTS, MAX_ANSWER_CHARS, MAX_MAGNITUDE, SOFTPLUS_LIMIT]
    screen = [PRE_COUNTS, POST_COUNTS, MAX_ELEMENTWISE, SCREEN_SHAPE, MAX_TRIVIAL_SHARE]
    return [ops, rows, sorted(SKIP), repr([chains, screen]), PROBLEM_TEMPLATES, SIZES, ROW_SIZES]
