"""Create an agent workdir for a problem (``cuda-agent workspace init PROBLEM DIR``).

The workdir gets the template (SKILL.md rendered for the backend, the fixed binding files, an
empty ``kernels/``), ``model.py`` (the problem, at the chosen size) and a starting
``model_new.py`` (the reference's ``Model`` renamed ``ModelNew``, which loads the same weights
but still uses torch ops, so it fails the strict policy until kernels replace them). The
problem's identity is recorded in ``.cuda_agent/workspace.json`` so the workspace tools know
which pristine problem to evaluate against; the workdir's own ``model.py`` is never trusted.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from string import Template

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.pyparse import parse_module
from cuda_agent.core.types import Problem
from cuda_agent.workspace.template_files import template_root, triton_template_root

METADATA = Path(".cuda_agent") / "workspace.json"

LANGUAGES = ("cuda", "triton")
TRITON_TEXT = {
    "cuda": {"INTERPRET_NOTE": " for the GPU you are timed on"},
    "cpu": {
        "INTERPRET_NOTE": " (on the cpu backend, Triton's interpreter runs it on the CPU: slow, "
        "but the same rules)"
    },
}
BACKEND_TEXT = {
    "cuda": {
        "BACKEND": "cuda",
        "BACKEND_NOTE": "kernels are CUDA C++, compiled with nvcc for the GPU you are timed on",
        "KERNEL_LANG": "CUDA",
        "KERNEL_EXT": "cu",
        "STREAM_NOTE": " and the `cudaStream_t` to launch on",
        "BINDING_INCLUDE": "#include <c10/cuda/CUDAStream.h>\n",
        "LAUNCH_EXTRA_PARAM": ", cudaStream_t stream",
        "LAUNCH_EXTRA_ARG": ", c10::cuda::getCurrentCUDAStream().stream()",
        "VENDOR_NOTE": " via cuBLAS / cuDNN, also called directly from C++",
        "LIBRARIES": "the CUDA runtime, cuBLAS (GEMM only) and cuDNN (convolution only)",
    },
    "cpu": {
        "BACKEND": "cpu",
        "BACKEND_NOTE": "kernels are plain C++ compiled with g++ -O3, timed on one CPU thread",
        "KERNEL_LANG": "C++",
        "KERNEL_EXT": "cpp",
        "STREAM_NOTE": "",
        "BINDING_INCLUDE": "",
        "LAUNCH_EXTRA_PARAM": "",
        "LAUNCH_EXTRA_ARG": "",
        "VENDOR_NOTE": "",
        "LIBRARIES": "the C++ standard library",
    },
}


def init_workspace(
    problem: Problem,
    directory: Path,
    backend: str,
    problem_spec: str,
    force: bool = False,
    language: str = "cuda",
) -> Path:
    """Materialise a workdir for ``problem`` in ``directory``; returns the directory.

    ``language``: ``cuda`` (C++/CUDA kernels compiled into ``cuda_extension``: the binding
    files) or ``triton`` (Triton kernels as Python modules in ``kernels/``: no binding)."""
    if language not in LANGUAGES:
        raise CudaAgentError(f"unknown language {language!r} (choose from {', '.join(LANGUAGES)})")
    directory = directory.expanduser()
    if directory.exists() and any(directory.iterdir()) and not force:
        raise CudaAgentError(f"{directory}: folder exists and is not empty (use --force)")
    text = {**BACKEND_TEXT[backend], **TRITON_TEXT[backend]}
    template = template_root() if language == "cuda" else triton_template_root()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kernels").mkdir(exist_ok=True)
    if language == "cuda":
        for name in ("binding.cpp", "binding_registry.h"):
            shutil.copyfile(template / name, directory / name)
    for name in ("SKILL.md", "kernels/README.md"):
        rendered = Template((template / name).read_text(encoding="utf-8")).substitute(text)
        (directory / name).write_text(rendered, encoding="utf-8")
    (directory / "model.py").write_text(problem.source, encoding="utf-8")
    header = (template / "model_new.py").read_text(encoding="utf-8")
    (directory / "model_new.py").write_text(
        header + "\n" + starting_model_new(problem.source), encoding="utf-8"
    )
    meta = {
        "problem": problem_spec,
        "problem_id": problem.id,
        "problem_hash": problem.content_hash,
        "size": problem.size,
        "backend": backend,
        "language": language,
    }
    (directory / METADATA).parent.mkdir(exist_ok=True)
    (directory / METADATA).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return directory


def read_metadata(directory: Path) -> dict[str, str]:
    path = directory / METADATA
    if not path.is_file():
        raise CudaAgentError(
            f"{directory}: not a workspace made by `cuda-agent workspace init` (no {METADATA})"
        )
    return dict(json.loads(path.read_text(encoding="utf-8")))


def starting_model_new(problem_source: str) -> str:
    """The problem's imports, constants and ``Model`` class, with ``Model`` renamed ``ModelNew``."""
    tree = parse_module(problem_source)
    lines = problem_source.splitlines()
    kept: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            continue  # the module docstring
        if isinstance(node, ast.FunctionDef) and node.name in ("get_inputs", "get_init_inputs"):
            continue
        first = min([node.lineno, *(d.lineno for d in _decorators(node))])
        segment = "\n".join(lines[first - 1 : node.end_lineno])
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            segment = segment.replace("class Model", "class ModelNew", 1)
            segment = segment.replace("super(Model,", "super(ModelNew,")
        kept.append(segment)
    return "\n\n".join(kept).strip() + "\n"


def _decorators(node: ast.stmt) -> list[ast.expr]:
    return list(getattr(node, "decorator_list", []))
