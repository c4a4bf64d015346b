"""``cuda-agent export`` refuses, in one line with exit status 2, what it cannot stand behind."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers import relu_solution, run_cli

DYNAMIC_SOURCES = """
import torch.nn as nn
from torch.utils.cpp_extension import load_inline


def source():
    return "torch::Tensor twice(torch::Tensor x) { return x + x; }"


ext = load_inline(name="ca_dynamic", cpp_sources=source(), functions=["twice"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.twice(x)
"""


def export(solution: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    options = ["--problem", "relu", "--out", str(out), "--backend", "cpu", "--baselines", "eager"]
    return run_cli("export", str(solution), *options, *extra, timeout=900)


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.mark.slow
def test_incorrect_solution_is_not_exported(tmp_path: Path) -> None:
    out = tmp_path / "project"
    line = one_error_line(export(relu_solution(tmp_path, "return ops.relu_wrong(x)"), out))
    assert line.startswith(
        "error: not exported: the solution does not evaluate correct here (verify: trial 1 of 5:"
    )
    assert not out.exists()


def test_sources_that_are_not_constants_are_refused_before_evaluating(tmp_path: Path) -> None:
    path = tmp_path / "dynamic.py"
    path.write_text(DYNAMIC_SOURCES)
    line = one_error_line(export(path, tmp_path / "project"))
    assert "1 load_inline call(s) with arguments that are not compile-time constants" in line


def test_unusable_folder_or_name(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "file.txt").write_text("x")
    solution = relu_solution(tmp_path, "return ops.relu_ok(x)")
    assert "exists and is not an empty folder" in one_error_line(export(solution, taken))
    line = one_error_line(export(solution, tmp_path / "new", "--name", "torch"))
    assert "reserved" in line
    line = one_error_line(export(solution, tmp_path / "new", "--name", "2fast"))
    assert "not a Python identifier" in line
