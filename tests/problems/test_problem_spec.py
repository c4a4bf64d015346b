"""``problem_spec`` names a problem so that ``resolve_problem`` gives back the same source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.core.errors import ProblemError
from cuda_agent.problems.sets import load_problem_set, problem_spec, resolve_problem

PROBLEM = (
    "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x)\n\n"
    "def get_inputs():\n    return [torch.randn(8, 8)]\n\ndef get_init_inputs():\n    return []\n"
)


@pytest.mark.parametrize("size", ["small", "standard"])
def test_bundled_problems_round_trip_at_their_size(size: str) -> None:
    for problem in load_problem_set("bundled", size=size):
        again = resolve_problem(problem_spec(problem), size)
        assert again.content_hash == problem.content_hash


def test_files_and_dataset_rows_round_trip(tmp_path: Path) -> None:
    single = tmp_path / "relu.py"
    single.write_text(PROBLEM)
    dataset = tmp_path / "dataset.jsonl"
    rows = [{"id": "a", "code": PROBLEM}, {"id": "b", "code": PROBLEM.replace("relu", "tanh")}]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for problem in [*load_problem_set(str(single)), *load_problem_set(str(dataset))]:
        again = resolve_problem(problem_spec(problem))
        assert (again.id, again.source) == (problem.id, problem.source)
    with pytest.raises(ProblemError, match="no problem 'c'"):
        resolve_problem(f"{dataset}#c")
