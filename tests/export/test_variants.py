"""Size variants of a problem: which constants count, and the sizes derived from them."""

from __future__ import annotations

import ast

from cuda_agent.problems.sets import resolve_problem
from cuda_agent.problems.variants import size_variants, used_size_constants, variant_values

PROBLEM = """
import torch
import torch.nn as nn

batch_size = 16
dim = 1024
hidden = dim * 4
unused = 77
eps = 1e-5
flag = True


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.w = nn.Parameter(torch.randn(hidden, unused))

    def forward(self, x):
        return x


def _shape():
    return (batch_size, hidden)


def get_inputs():
    return [torch.randn(*_shape())]


def get_init_inputs():
    return [hidden, eps]
"""


def test_constants_are_those_the_input_functions_reach() -> None:
    # dim through the derived `hidden`, batch_size through a helper; `unused` only in Model,
    # floats and bools are not sizes
    assert used_size_constants(PROBLEM, "p.py") == {"batch_size": 16, "dim": 1024}


def test_each_constant_is_halved_doubled_and_made_odd() -> None:
    assert variant_values(1024) == [("halved", 512), ("doubled", 2048), ("odd", 127)]
    assert variant_values(16) == [("halved", 8), ("doubled", 32), ("odd", 17)]
    assert variant_values(3) == [("halved", 1), ("doubled", 6), ("odd", 5)]
    assert variant_values(1) == [("doubled", 2), ("odd", 3)]  # never 0, never the value itself
    assert variant_values(2) == [("halved", 1), ("doubled", 4), ("odd", 3)]


def test_variants_rewrite_one_constant_at_a_time() -> None:
    variants, left_out = size_variants(PROBLEM, "p.py")
    assert left_out == 0
    assert [(v.label, v.kind) for v in variants] == [
        ("batch_size=8", "halved"),
        ("batch_size=32", "doubled"),
        ("batch_size=17", "odd"),
        ("dim=512", "halved"),
        ("dim=2048", "doubled"),
        ("dim=127", "odd"),
    ]
    first = ast.parse(variants[4].source)
    values = {
        node.targets[0].id: ast.unparse(node.value)  # type: ignore[attr-defined]
        for node in first.body
        if isinstance(node, ast.Assign)
    }
    assert values["dim"] == "2048" and values["batch_size"] == "16"
    assert values["hidden"] == "dim * 4"  # derived sizes follow their constant


def test_limit_counts_what_was_left_out() -> None:
    variants, left_out = size_variants(PROBLEM, "p.py", limit=4)
    assert len(variants) == 4 and left_out == 2


def test_bundled_problem_with_init_sizes() -> None:
    problem = resolve_problem("bias_gelu_scale", "small")
    assert set(used_size_constants(problem.source, problem.id)) == {"batch_size", "dim"}
