"""Static analysis of a solution (AST, never regex): structure, inline builds, findings.

* the entry file must parse and define ``ModelNew`` at top level;
* ``load_inline`` calls whose arguments are compile-time constants (string literals, module
  constants, concatenations, ``textwrap.dedent``) are extracted so the build can run before
  the worker starts, on a machine without a GPU; calls that cannot be resolved statically are
  built by the worker's shim instead (same builder, same cache);
* findings note constructs worth a look (threads, ctypes, frame or gc introspection, streams);
  they are informational: verdicts come from runtime checks, which names cannot dodge.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from cuda_agent.core.pyparse import parse_module

INLINE_POSITIONAL = (
    "name",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_ldflags",
    "extra_include_paths",
    "build_directory",
    "verbose",
    "with_cuda",
)
# Arguments that do not change what is built (our builder has its own folder and log): a call
# whose only non-constant arguments are among these is still resolved, without them
BUILD_NEUTRAL = frozenset({"build_directory", "verbose", "keep_intermediates"})
NOTABLE_MODULES = {
    "threading": "starts threads",
    "multiprocessing": "starts processes",
    "concurrent": "uses executors",
    "ctypes": "calls native code via ctypes",
    "gc": "inspects the garbage collector",
    "inspect": "inspects frames",
    "subprocess": "runs programs",
    "socket": "opens sockets",
    "triton": "uses Triton",
}
NOTABLE_CALLS = {
    "_getframe": "walks Python frames",
    "Stream": "creates CUDA streams",
    "set_float32_matmul_precision": "changes matmul precision",
    "compile": "uses torch.compile",
    "CUDAGraph": "uses CUDA graphs",
    "exec": "executes generated code",
    "eval": "evaluates code",
}


class Unresolved(Exception):
    """A value that is not a compile-time constant."""


@dataclass
class StaticReport:
    error: str | None = None
    inline_calls: list[dict[str, Any]] = field(default_factory=list)
    # calls inside a function whose arguments are constants of that function (a source string
    # assigned once in ``__init__``): they may never run, so building them is only a head
    # start (see ``evaluator/pipeline.py``); ``unresolved_inline_calls`` counts neither kind
    local_inline_calls: list[dict[str, Any]] = field(default_factory=list)
    unresolved_inline_calls: int = 0
    findings: list[str] = field(default_factory=list)


def python_trees(files: dict[str, str]) -> Iterator[tuple[str, ast.Module]]:
    """The solution's Python files that parse, as (name, tree); the others are skipped (the
    entry file's own syntax error is ``analyse``'s verdict)."""
    for name, text in files.items():
        if not name.endswith(".py"):
            continue
        try:
            yield name, parse_module(text)
        except SyntaxError:
            continue


def analyse(source: str, filename: str) -> StaticReport:
    report = StaticReport()
    try:
        tree = parse_module(source, filename=filename)
    except SyntaxError as err:
        column = f":{err.offset}" if err.offset else ""  # file:line:column, as compilers say
        report.error = f"{filename}:{err.lineno}{column}: syntax error: {err.msg}"
        return report
    if not _defines(tree, "ModelNew"):
        report.error = f"{filename}: defines no top-level `class ModelNew`"
        return report
    env = _module_constants(tree)
    functions = _enclosing_functions(tree)
    for call in _inline_calls(tree):
        try:
            report.inline_calls.append(_call_kwargs(call, env))
            continue
        except Unresolved:
            pass
        function = functions.get(id(call))
        try:
            if function is None:
                raise Unresolved("not in a function")
            report.local_inline_calls.append(_call_kwargs(call, _local_constants(function, env)))
        except Unresolved:
            report.unresolved_inline_calls += 1
    report.findings = _findings(tree)
    return report


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
        if isinstance(node, ast.ImportFrom) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            return True
    return False


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    env: dict[str, Any] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            try:
                env[node.targets[0].id] = const_eval(node.value, env)
            except Unresolved:
                env.pop(node.targets[0].id, None)
    return env


FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


def _enclosing_functions(tree: ast.Module) -> dict[int, FunctionNode]:
    """id(call node) -> the innermost function containing it."""
    found: dict[int, FunctionNode] = {}

    def visit(node: ast.AST, function: FunctionNode | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, FunctionNode) else function
            if isinstance(child, ast.Call) and function is not None:
                found[id(child)] = function
            visit(child, inner)

    visit(tree, None)
    return found


def _local_constants(function: FunctionNode, env: dict[str, Any]) -> dict[str, Any]:
    """The module's constants plus the function's own: names bound exactly once in it (in any
    block), by a plain assignment of a constant expression. A name bound twice (``if`` /
    ``else``, a loop, ``+=``) is left out: which value a call sees is not a compile-time fact."""
    stores = collections.Counter(
        node.id
        for node in ast.walk(function)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
    )
    local = {k: v for k, v in env.items() if k not in stores}
    assignments = sorted(
        (
            node
            for node in ast.walk(function)
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and stores[node.targets[0].id] == 1
        ),
        key=lambda n: (n.lineno, n.col_offset),
    )
    for node in assignments:
        name = node.targets[0]
        assert isinstance(name, ast.Name)
        with contextlib.suppress(Unresolved):
            local[name.id] = const_eval(node.value, local)
    return local


def _inline_calls(tree: ast.Module) -> list[ast.Call]:
    aliases = {"load_inline"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch.utils.cpp_extension":
            aliases |= {a.asname or a.name for a in node.names if a.name == "load_inline"}
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in aliases) or (
            isinstance(func, ast.Attribute) and func.attr == "load_inline"
        ):
            calls.append(node)
    return calls


def _call_kwargs(call: ast.Call, env: dict[str, Any]) -> dict[str, Any]:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        raise Unresolved("star arguments")
    named = [*zip(INLINE_POSITIONAL, call.args, strict=False)]
    named += [(kw.arg, kw.value) for kw in call.keywords if kw.arg is not None]
    kwargs = {name: const_eval(arg, env) for name, arg in named if name not in BUILD_NEUTRAL}
    if "name" not in kwargs or "cpp_sources" not in kwargs:
        raise Unresolved("missing name or cpp_sources")
    return kwargs


def const_eval(node: ast.expr, env: dict[str, Any]) -> Any:
    """Evaluate a constant expression (literals, names of constants, +, dedent, join)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise Unresolved(node.id)
    if isinstance(node, ast.List | ast.Tuple):
        items = [const_eval(e, env) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise Unresolved("dict unpacking")
        return {
            const_eval(k, env): const_eval(v, env)
            for k, v in zip(node.keys, node.values, strict=True)
            if k
        }
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif (
                isinstance(value, ast.FormattedValue)
                and value.format_spec is None
                and value.conversion == -1
            ):
                parts.append(str(const_eval(value.value, env)))
            else:
                raise Unresolved("formatted value")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = const_eval(node.left, env), const_eval(node.right, env)
        if type(left) is type(right) and isinstance(left, str | list | tuple):
            return left + right
        raise Unresolved("addition")
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "dedent":
            return textwrap.dedent(_as_str(const_eval(node.args[0], env)))
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "join"
            and isinstance(func.value, ast.Constant)
        ):
            items = const_eval(node.args[0], env)
            if isinstance(func.value.value, str) and isinstance(items, list | tuple):
                return func.value.value.join(_as_str(i) for i in items)
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ("strip", "lstrip", "rstrip"):
            return getattr(_as_str(const_eval(func.value, env)), func.attr)()
    raise Unresolved(type(node).__name__)


def _as_str(value: Any) -> str:
    if not isinstance(value, str):
        raise Unresolved("not a string")
    return value


def _findings(tree: ast.Module) -> list[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
            for name in names:
                root = name.split(".")[0]
                if root in NOTABLE_MODULES:
                    found.add(f"{NOTABLE_MODULES[root]} ({root})")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in NOTABLE_CALLS:
                found.add(f"{NOTABLE_CALLS[name]} ({name})")
        elif isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name | type(None)) for h in node.handlers
        ):
            found.add("has try/except (runtime checks catch fallbacks to torch)")
    return sorted(found)
