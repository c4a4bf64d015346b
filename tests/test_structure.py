"""The package's import graph has no circle, and follows the layers its docstring names.

Every module under ``src/cuda_agent`` is parsed with ``ast``; every ``import`` and ``from``
statement counts, wherever it is (module level, inside a function, under ``TYPE_CHECKING``),
with relative imports resolved. An import of ``a.b.c`` (or ``from a.b import c``) is an import
of the module ``a.b.c``, or of its nearest parent that is a module of the package. Imports of
other packages are left out. A strongly connected component of more than one module (or a
module importing itself) fails the test, named; so does an import of a higher layer than the
importer's (``cuda_agent/__init__.py``: "The package is layered ...") or of the package root
(the front door, which imports the layers, not the other way round). Inside the evaluator, the
same holds for its parts (``evaluator/__init__.py``: "The evaluator is layered ..."), and its
worker imports only the packages that sentence names outside the evaluator. The worker's mode
table (``evaluator/worker/__init__.py``) names the modules ``worker/modes/`` holds.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import cuda_agent.core.paths as paths

PACKAGE = "cuda_agent"
ROOT = Path(paths.__file__).resolve().parent.parent  # src/cuda_agent in this checkout
SKIPPED = ("problems/bundled", "examples", "workspace/template", "workspace/template_triton")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under the package except what data folders hold
    (bundled problems, examples, workspace templates: files that are copied or loaded, never
    imported); a data folder's own ``__init__.py`` is a module."""
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        name = rel.as_posix()
        if any(name.startswith(skip + "/") and name != f"{skip}/__init__.py" for skip in SKIPPED):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([PACKAGE, *parts])] = path
    return found


def nearest(name: str, modules: dict[str, Path]) -> str | None:
    """``name`` if it is one of the package's modules, else its nearest parent that is."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    targets: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names = [f"{stem}.{alias.name}" if alias.name != "*" else stem for alias in node.names]
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                target = nearest(name, modules)
                if target is not None:
                    targets.add(target)
    return targets


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_files(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, and modules that import
    themselves (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in graph.get(node, ()):
                        found.append(sorted(component))
    return found


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"a"}}
    assert sorted(circles(graph)) == [["a", "b", "c"], ["e"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_relative_and_nested_imports_are_resolved(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("X = 1\n")
    (pkg / "sub" / "__init__.py").write_text("from . import leaf\n")
    (pkg / "sub" / "leaf.py").write_text(
        "def f():\n    from ..low import X\n    import cuda_agent.sub.missing.deeper\n"
    )
    graph = import_graph(pkg)
    assert graph[f"{PACKAGE}.sub"] == {f"{PACKAGE}.sub.leaf"}
    assert graph[f"{PACKAGE}.sub.leaf"] == {f"{PACKAGE}.low", f"{PACKAGE}.sub"}


def test_no_import_circle_in_the_package() -> None:
    graph = import_graph()
    assert len(graph) > 100, sorted(graph)  # the scan saw the package
    found = circles(graph)
    lines = []
    for component in found:
        lines.append(" <-> ".join(component))
        for module in component:
            inside = sorted(graph[module] & set(component))
            lines.append(f"    {module} imports {', '.join(inside)}")
    assert not found, "import circles (strongly connected components):\n" + "\n".join(lines)


def documented_layers() -> dict[str, int]:
    """Top-level package or module -> its layer, from the layering sentence of the package's
    docstring (``core``, ``examples`` <- ``problems``, ... <- ``cli``), lowest first."""
    doc = ast.get_docstring(ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))) or ""
    found = re.search(r"The package is layered[^:]*:(.*?)\(", doc, re.S)
    assert found, "the package docstring has no layering sentence"
    layers = [re.findall(r"``(\w+)``", part) for part in found.group(1).split("<-")]
    return {name: level for level, names in enumerate(layers) for name in names}


def test_imports_follow_the_documented_layers() -> None:
    layers = documented_layers()
    graph = import_graph()
    tops = {name.split(".")[1] for name in graph if name.count(".") >= 1}
    assert tops - {"__main__"} == set(layers), "the layering sentence lists other parts"
    wrong = []
    for module, targets in sorted(graph.items()):
        if module in (PACKAGE, f"{PACKAGE}.__main__"):  # the front doors, above every layer
            continue
        for target in sorted(targets):
            if target == PACKAGE:
                wrong.append(f"{module} imports the package root")
                continue
            low, high = module.split(".")[1], target.split(".")[1]
            if layers[high] > layers[low]:
                wrong.append(f"{module} ({low}) imports {target} ({high}), a higher layer")
    assert not wrong, "\n".join(wrong)


EVALUATOR = f"{PACKAGE}.evaluator"


def documented_evaluator_layers(root: Path = ROOT) -> tuple[dict[str, int], set[str]]:
    """The evaluator's parts (subpackage or top-level module) -> layer, lowest first, and the
    top-level packages its worker may import besides the evaluator, from the layering sentence
    of ``evaluator/__init__.py``."""
    source = (root / "evaluator" / "__init__.py").read_text(encoding="utf-8")
    doc = ast.get_docstring(ast.parse(source)) or ""
    found = re.search(r"The evaluator is layered[^:]*:(.*?);(.*?)\(", doc, re.S)
    assert found, "the evaluator's docstring has no layering sentence"
    layers = [re.findall(r"``(\w+)``", part) for part in found.group(1).split("<-")]
    outside = re.search(r"outside the evaluator, ``worker`` imports only(.*)", found.group(2), re.S)
    assert outside, "the layering sentence does not say what the worker imports"
    allowed = set(re.findall(r"``(\w+)``", outside.group(1)))
    return {name: level for level, names in enumerate(layers) for name in names}, allowed


def evaluator_part(module: str) -> str | None:
    """``cuda_agent.evaluator.checks.shapes`` -> ``checks``; None outside the evaluator's parts."""
    if not module.startswith(EVALUATOR + "."):
        return None
    return module.split(".")[2]


def evaluator_violations(
    graph: dict[str, set[str]], layers: dict[str, int], worker_imports: set[str]
) -> list[str]:
    """The evaluator's imports of a higher part than the importer's, and the worker's imports of
    a top-level package other than those allowed."""
    wrong = []
    for module, targets in sorted(graph.items()):
        low = evaluator_part(module)
        if low is None:
            continue
        for target in sorted(targets):
            high = evaluator_part(target)
            if high is not None and layers[high] > layers[low]:
                wrong.append(f"{module} ({low}) imports {target} ({high}), a higher part")
            top = target.split(".")[1] if target.count(".") >= 1 else target
            if (
                low == "worker"
                and high is None
                and top != "evaluator"
                and top not in worker_imports
            ):
                wrong.append(f"{module} (worker) imports {target} ({top})")
    return wrong


def test_evaluator_imports_follow_its_documented_layers() -> None:
    layers, worker_imports = documented_evaluator_layers()
    graph = import_graph()
    parts = {part for part in map(evaluator_part, graph) if part is not None}
    assert parts == set(layers), "the evaluator's layering sentence lists other parts"
    assert layers["builder"] < layers["worker"] < layers["launch"] < layers["checks"]
    wrong = evaluator_violations(graph, layers, worker_imports)
    assert not wrong, "\n".join(wrong)


def test_the_evaluator_rule_catches_a_planted_violation(tmp_path: Path) -> None:
    pkg = tmp_path / PACKAGE
    for folder in ("evaluator/worker", "evaluator/launch", "evaluator/checks", "problems"):
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "evaluator" / "__init__.py").write_text("")
    (pkg / "core.py").write_text("")
    (pkg / "problems" / "sets.py").write_text("")
    (pkg / "evaluator" / "pipeline.py").write_text("from .checks import shapes\n")
    (pkg / "evaluator" / "checks" / "shapes.py").write_text("from ..launch import spawn\n")
    (pkg / "evaluator" / "launch" / "spawn.py").write_text(
        "def f():\n    from cuda_agent.evaluator.checks.shapes import plan\n"
    )
    (pkg / "evaluator" / "worker" / "mode.py").write_text(
        "import cuda_agent.core\nfrom cuda_agent.problems import sets\n"
        "from cuda_agent.evaluator import pipeline\n"
    )
    layers, worker_imports = documented_evaluator_layers()
    ev = EVALUATOR
    assert evaluator_violations(import_graph(pkg), layers, worker_imports) == [
        f"{ev}.launch.spawn (launch) imports {ev}.checks.shapes (checks), a higher part",
        f"{ev}.worker.mode (worker) imports {ev}.pipeline (pipeline), a higher part",
        f"{ev}.worker.mode (worker) imports {PACKAGE}.problems.sets (problems)",
    ]


def test_the_worker_mode_table_names_the_mode_modules() -> None:
    doc = ast.get_docstring(ast.parse((ROOT / "evaluator/worker/__init__.py").read_text())) or ""
    rows = re.findall(r"^(\w+) +``modes/(\w+)\.py`` +``([\w/]+\.py)``$", doc, re.M)
    assert rows, "the worker's docstring has no mode table"
    assert all(mode == module for mode, module, _ in rows), rows
    held = {p.stem for p in (ROOT / "evaluator/worker/modes").glob("*.py")} - {"__init__"}
    assert {mode for mode, _, _ in rows} == held
    assert all((ROOT / parent).is_file() for _, _, parent in rows), rows


def test_no_module_name_twice_in_the_evaluator() -> None:
    """A module's file name says which module it is anywhere under ``evaluator/`` (the worker's
    modes keep the mode's name; the parent side names what it does with the mode)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "evaluator").rglob("*.py")):
        rel = path.relative_to(ROOT / "evaluator").as_posix()
        if path.name not in ("__init__.py", "__main__.py") and not rel.startswith(
            "builder/include/"
        ):
            seen.setdefault(path.name, []).append(rel)
    twice = {name: places for name, places in seen.items() if len(places) > 1}
    assert not twice, twice
