from pathlib import Path

import pytest

from cuda_agent.core.errors import ProblemError
from cuda_agent.problems.loader import load_problem_file
from cuda_agent.problems.source import apply_size_overrides, check_problem_source

GOOD = """import torch
import torch.nn as nn

batch_size = 128  # rows
dim: int = 4096
scale = 0.5


class Model(nn.Module):
    def forward(self, x):
        return x * scale


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_good_source_and_its_constants() -> None:
    shape = check_problem_source(GOOD, "p.py")
    assert shape.constants == {"batch_size": 128, "dim": 4096, "scale": 0.5}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "class Model:\n    def forward(self, x)\n        return x\n",
            "p.py: syntax error at line 2",
        ),
        (GOOD.replace("class Model", "class Net"), "no top-level `class Model`"),
        (
            GOOD.replace("def get_inputs", "def make_inputs"),
            "missing top-level function(s): get_inputs",
        ),
        (GOOD.replace("def forward", "def run"), "`class Model` has no `forward` method"),
    ],
)
def test_bad_sources_give_one_precise_line(source: str, message: str) -> None:
    with pytest.raises(ProblemError) as err:
        check_problem_source(source, "p.py")
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_size_overrides_keep_layout_and_comments() -> None:
    out = apply_size_overrides(GOOD, {"batch_size": 4, "dim": 16}, "p.py")
    assert "batch_size = 4  # rows" in out
    assert "dim: int = 16" in out
    assert check_problem_source(out, "p.py").constants["dim"] == 16


def test_unknown_override_is_an_error() -> None:
    with pytest.raises(ProblemError, match="name no top-level constant"):
        apply_size_overrides(GOOD, {"batch": 4}, "p.py")


def test_load_problem_file_records_identity(tmp_path: Path) -> None:
    level_dir = tmp_path / "level2"
    level_dir.mkdir()
    path = level_dir / "7_Scale.py"
    path.write_text(GOOD)
    problem = load_problem_file(path)
    assert problem.id == "7_Scale"
    assert problem.level == 2
    assert len(problem.content_hash) == 64
    missing = tmp_path / "nope.py"
    with pytest.raises(ProblemError, match="no such file"):
        load_problem_file(missing)
