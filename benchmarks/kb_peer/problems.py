"""The problems a mode runs: ``--problems`` / ``--problem-file`` lists, their files in the
checkout, and the reference -> candidate transform (``class Model`` renamed ``ModelNew``).

Source text only: nothing here imports KernelBench or runs a problem.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

_CLASS_RE = re.compile(r"^(\s*class\s+)Model(\s*[(:])", re.MULTILINE)
_SUPER_RE = re.compile(r"\bsuper\(\s*Model\s*,")


def to_model_new(src: str) -> str:
    """The reference source with ``class Model`` renamed ``ModelNew``; the rest unchanged."""
    out, count = _CLASS_RE.subn(r"\1ModelNew\2", src)
    if count != 1:
        raise ValueError(f"expected exactly one 'class Model' definition, found {count}")
    out = _SUPER_RE.sub("super(ModelNew,", out)
    classes = {n.name for n in ast.walk(ast.parse(out)) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes or "Model" in classes:
        raise ValueError(f"transform left classes {sorted(classes)}")
    return out


def resolve_problem(kb: Path, spec: str) -> Path:
    rel = re.sub(r"^[Ll](\d+)/", r"level\1/", spec.strip())
    for candidate in (kb / "KernelBench" / rel, Path(spec)):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"problem {spec!r} not found under {kb / 'KernelBench'}")


def problem_list(args: argparse.Namespace) -> list[str]:
    items: list[str] = []
    for chunk in args.problems or []:
        items += [p.strip() for p in chunk.split(",") if p.strip()]
    if args.problem_file:
        for line in Path(args.problem_file).read_text().splitlines():
            line = line.split("#", 1)[0]
            items += [p.strip() for p in line.split(",") if p.strip()]
    return items
