"""A Triton workspace: its template, its tools, and ``--language`` at evaluation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.init import init_workspace, read_metadata

KERNEL = """import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)
"""
MODEL_NEW = """import torch
import torch.nn as nn
import triton

from kernels.relu import relu_kernel


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""


def test_the_triton_template(tmp_path: Path) -> None:
    work = init_workspace(
        resolve_problem("relu", "small"), tmp_path / "w", "cpu", "relu", language="triton"
    )
    names = {p.relative_to(work).as_posix() for p in work.rglob("*") if p.is_file()}
    assert {"SKILL.md", "model.py", "model_new.py", "kernels/README.md"} <= names
    assert "binding.cpp" not in names and "binding_registry.h" not in names
    assert (
        "Triton" in (work / "SKILL.md").read_text()
        and "interpreter" in (work / "kernels/README.md").read_text()
    )
    assert read_metadata(work)["language"] == "triton"


def test_a_language_requirement_is_checked_before_anything_runs(tmp_path: Path) -> None:
    path = tmp_path / "torch_only.py"
    path.write_text(MODEL_NEW.replace("from kernels.relu import relu_kernel\n", ""))
    result = evaluate(
        resolve_problem("relu", "small"),
        load_solution(path),
        EvalOptions(backend="cpu", language="triton").validate(),
    )
    assert result.error is not None and result.error.stage == "static"
    assert (
        "written in pytorch, not triton" in result.error.message
        and "wrong_language" in result.flags
    )
    assert result.language == "pytorch" and "worker" not in (result.details.timings_s or {})


@pytest.mark.slow
def test_the_tools_on_a_triton_workspace(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    work = init_workspace(
        resolve_problem("relu", "small"), tmp_path / "w", "cpu", "relu", language="triton"
    )
    (work / "kernels" / "relu.py").write_text(KERNEL)
    (work / "model_new.py").write_text(MODEL_NEW)

    def tool(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cuda_agent", "tool", *args],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=900,
            env=dict(os.environ),
        )

    compiled = tool("compile")
    assert compiled.returncode == 0 and "compile: ok" in compiled.stdout, (
        compiled.stdout + compiled.stderr
    )
    verified = tool("verify", "--baselines", "eager")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "correctness: PASS" in verified.stdout and "reward: 1" in verified.stdout
    (work / "kernels" / "relu.py").write_text(KERNEL.replace("tl.maximum(", "tl.maximum(0.5 + "))
    wrong = tool("verify", "--baselines", "eager")
    assert wrong.returncode == 1 and "FAILED" in wrong.stdout
