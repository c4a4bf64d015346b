"""The task lint flags problems that a trivial candidate could pass (exploit family A2)."""

import pytest

from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.worker.modes.problem_check import run as run_check_problem
from cuda_agent.evaluator.worker.protocol import EvalSettings, ResultChannel
from tests.helpers import source_problem

TEMPLATE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 64)

    def forward(self, x):
        return {expr}

def get_inputs():
    return [torch.randn(8, 64)]

def get_init_inputs():
    return []
"""

NO_CHANNEL = ResultChannel(-1, "")  # a channel that sends nothing
CPU = EvalSettings(backend="cpu")


def lint(expr: str) -> list[str]:
    problem = source_problem(TEMPLATE.format(expr=expr))
    request = worker_request("problem_check", CPU, problem, seed=5)
    report = run_check_problem(request, NO_CHANNEL)
    assert report.ok, report
    return list(report.lint)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("self.linear(x).relu()", []),
        # near zero everywhere: within the absolute tolerance of anything small
        (
            "torch.softmax(x.repeat(1, 2000), dim=-1)",
            ["independent_of_inputs", "independent_of_weights", "zeros_pass", "constant_pass"],
        ),
        (
            "self.linear.weight.sum(0, keepdim=True).expand(8, 64).clone()",
            ["independent_of_inputs"],
        ),
        ("x * 2", ["independent_of_weights"]),
        (
            "torch.ones_like(x) * 3",
            ["independent_of_inputs", "independent_of_weights", "constant_pass"],
        ),
        ("x + torch.rand_like(x)", ["nondeterministic"]),
    ],
)
def test_lint_flags(expr: str, expected: list[str]) -> None:
    assert lint(expr) == expected


def test_broken_problems_are_errors() -> None:
    problem = source_problem(TEMPLATE.format(expr="x / 0 * 0"))
    request = worker_request("problem_check", CPU, problem, seed=5)
    report = run_check_problem(request, NO_CHANNEL)
    assert not report.ok and "NaN or infinite" in report.message


def test_checking_in_process_leaves_autograd_on() -> None:
    import torch

    lint("torch.relu(x)")
    assert torch.is_grad_enabled()  # a later test in this process may train
