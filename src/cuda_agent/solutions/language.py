"""Which kernel language a solution is written in, read from its code (AST, nothing runs).

* ``cuda``: C++/CUDA compiled into an extension (``torch.utils.cpp_extension``'s
  ``load_inline`` / ``load``, or a workdir's ``kernels/`` sources);
* ``triton``: Triton kernels (``import triton`` and a function decorated with ``triton.jit``,
  ``triton.autotune`` or ``triton.heuristics``, or with ``jit`` imported from Triton);
* ``cuda+triton``: both;
* ``pytorch``: neither (PyTorch alone: no custom kernel at all).

The result says the language in ``EvalResult.language``; ``--language`` requires one. What it
does not do: decide what counts as a custom kernel (the worker counts the launches it hooks).
"""

from __future__ import annotations

import ast

from cuda_agent.core.types import Solution, SolutionKind
from cuda_agent.solutions.static import python_trees

LANGUAGES = ("cuda", "triton", "cuda+triton", "pytorch")
REQUIRABLE = ("cuda", "triton")
TRITON_DECORATORS = {"jit", "autotune", "heuristics"}
BUILD_CALLS = {"load_inline", "load"}


def detect_language(solution: Solution) -> str:
    uses_cuda = solution.kind is SolutionKind.WORKDIR and any(
        name.startswith("kernels/") and not name.endswith(".py") for name in solution.files
    )
    uses_triton = False
    for _name, tree in python_trees(solution.files):
        triton_names = _triton_aliases(tree)
        uses_triton = uses_triton or _decorated(tree, triton_names)
        uses_cuda = uses_cuda or _builds_extension(tree)
    if uses_cuda and uses_triton:
        return "cuda+triton"
    return "cuda" if uses_cuda else "triton" if uses_triton else "pytorch"


def written_in(language: str, required: str) -> bool:
    """Whether a solution in ``language`` meets ``--language required``."""
    return required in language.split("+")


def _triton_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound to the triton module, names bound to its decorators)."""
    modules: set[str] = set()
    decorators: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton" or alias.name.startswith("triton."):
                    modules.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            for alias in node.names:
                if alias.name in TRITON_DECORATORS:
                    decorators.add(alias.asname or alias.name)
    return modules, decorators


def _decorated(tree: ast.Module, names: tuple[set[str], set[str]]) -> bool:
    modules, decorators = names
    if not modules and not decorators:
        return False
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if isinstance(target, ast.Name) and target.id in decorators:
                return True
            if (
                isinstance(target, ast.Attribute)
                and target.attr in TRITON_DECORATORS
                and isinstance(target.value, ast.Name)
                and target.value.id in modules
            ):
                return True
    return False


def _builds_extension(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in BUILD_CALLS and _from_cpp_extension(tree, name, func):
                return True
    return False


def _from_cpp_extension(tree: ast.Module, name: str, func: ast.expr) -> bool:
    """``load_inline(...)`` imported from ``torch.utils.cpp_extension``, or reached through it
    (``cpp_extension.load(...)``, ``torch.utils.cpp_extension.load_inline(...)``, or a name
    the module was imported as)."""
    if isinstance(func, ast.Attribute):
        owner = ast.unparse(func.value)
        return "cpp_extension" in owner or owner in _module_aliases(tree)
    return any(
        isinstance(node, ast.ImportFrom)
        and (node.module or "").endswith("cpp_extension")
        and any((a.asname or a.name) == name for a in node.names)
        for node in ast.walk(tree)
    )


def _module_aliases(tree: ast.Module) -> set[str]:
    """Names bound to ``torch.utils.cpp_extension`` itself."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(
                a.asname for a in node.names if a.asname and a.name.endswith("cpp_extension")
            )
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("utils"):
            names.update(a.asname or a.name for a in node.names if a.name == "cpp_extension")
    return names
