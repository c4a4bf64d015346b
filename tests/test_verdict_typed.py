"""A verdict is read through its typed fields above ``core/``: no string key into ``details``.

``EvalResult.details`` is an ``EvalDetails`` (``core/details.py``) and the worker's part is
``EvalResult.record``; the JSON form (``to_dict``, ``from_dict``) is made and parsed in
``core/`` only. Every module of the package outside ``core/``, and every benchmark script, is
parsed with ``ast``; these fail the test, named with file and line:

- ``x.details["key"]``, ``details["key"]``, ``x.shown_details()["key"]`` and
  ``x.details.get(...)`` / ``.setdefault`` / ``.update`` / ``.pop`` (a dict used as the
  verdict's details);
- ``"key" in x.details``;
- ``something["details"]`` and ``something.get("details")`` (the JSON form read by hand).

What it does not check: a dict that was first given another name (``shown = r.to_dict()``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_structure import ROOT

BENCHMARKS = ROOT.parent.parent / "benchmarks"
DICT_METHODS = {"get", "setdefault", "update", "pop", "items", "keys", "values"}


def _is_details(node: ast.AST) -> bool:
    """``x.details``, ``details`` or ``x.shown_details()``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr == "shown_details"
    return (isinstance(node, ast.Attribute) and node.attr == "details") or (
        isinstance(node, ast.Name) and node.id == "details"
    )


def _is_text(node: ast.AST, text: str | None = None) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and (text is None or node.value == text)
    )


def string_key_reads(source: str) -> list[int]:
    """The lines of ``source`` that read a verdict's details by string key (module docstring)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and (
            (_is_details(node.value) and _is_text(node.slice)) or _is_text(node.slice, "details")
        ):
            found.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, owner = node.func.attr, node.func.value
            if (_is_details(owner) and method in DICT_METHODS) or (
                method == "get" and node.args and _is_text(node.args[0], "details")
            ):
                found.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.In, ast.NotIn)) and _is_details(right)
            for op, right in zip(node.ops, node.comparators, strict=True)
        ):
            found.append(node.lineno)
    return sorted(set(found))


def _files() -> list[Path]:
    package = [p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] != "core"]
    return sorted([*package, *BENCHMARKS.rglob("*.py")])


def test_the_finder_finds_each_kind_of_string_key_read() -> None:
    planted = (
        'a = result.details["seed"]\n'
        'b = details.get("timings_s")\n'
        'result.details.setdefault("notes", [])\n'
        'c = "shapes" in result.details\n'
        'd = row["result"]["details"]\n'
        'e = row.get("details")\n'
        'h = result.shown_details()["seed"]\n'
        "f = result.details.seed\n"  # typed: not a finding
        'g = other["key"]\n'  # not a verdict: not a finding
    )
    assert string_key_reads(planted) == [1, 2, 3, 4, 5, 6, 7]


def test_no_string_key_read_of_details_outside_core() -> None:
    files = _files()
    assert len(files) > 100, "the package was not found"
    offenders = [
        f"{path.relative_to(ROOT.parent.parent)}:{line}"
        for path in files
        for line in string_key_reads(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "read the verdict through EvalResult's typed fields (result.details.<field>, "
        f"result.record.<field>), not by string key: {offenders}"
    )
