import ast
from pathlib import Path

import pytest

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.workspace.init import init_workspace, read_metadata, starting_model_new


def test_init_creates_the_template_for_the_backend(tmp_path: Path) -> None:
    problem = resolve_problem("gemm_bias_relu", "small")
    root = init_workspace(problem, tmp_path / "ws", "cuda", "gemm_bias_relu")
    names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert names == [
        ".cuda_agent/workspace.json",
        "SKILL.md",
        "binding.cpp",
        "binding_registry.h",
        "kernels/README.md",
        "model.py",
        "model_new.py",
    ]
    skill = (root / "SKILL.md").read_text()
    assert "Backend: **cuda**" in skill and "kernels/" in skill and "${" not in skill
    assert "cuda-agent tool verify" in skill
    assert (root / "model.py").read_text() == problem.source
    meta = read_metadata(root)
    assert meta["problem_hash"] == problem.content_hash and meta["backend"] == "cuda"


def test_starting_model_new_is_the_reference_renamed() -> None:
    problem = resolve_problem("gemm_bias_relu")
    text = starting_model_new(problem.source)
    tree = ast.parse(text)
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert classes == ["ModelNew"] and "get_inputs" not in functions


def test_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(CudaAgentError, match="not empty"):
        init_workspace(resolve_problem("relu"), tmp_path, "cpu", "relu")
    with pytest.raises(CudaAgentError, match="not a workspace"):
        read_metadata(tmp_path)
