"""Problem sets: the bundled set, a KernelBench checkout read in place, a folder of files, or a
synthesised dataset.

``resolve_problem`` turns what a user types (a bundled id or a path) into a ``Problem``;
``load_problem_set`` lists a whole set. Nothing here runs problem code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cuda_agent.core.errors import ProblemError
from cuda_agent.core.types import Problem
from cuda_agent.problems.dataset import DATASET_SUFFIXES, dataset_problems
from cuda_agent.problems.loader import load_problem_file

BUNDLED = "bundled"
DATASET_FILE = "dataset.jsonl"
KERNELBENCH_ID = re.compile(r"^L(\d+)_(.+)$")


@dataclass(frozen=True)
class BundledEntry:
    id: str
    level: int
    file: str
    tags: tuple[str, ...]
    description: str
    small: dict[str, int | float]


def bundled_root() -> Path:
    return Path(str(resources.files("cuda_agent.problems") / "bundled"))


def bundled_entries() -> list[BundledEntry]:
    manifest = bundled_root() / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    return [
        BundledEntry(
            id=item["id"],
            level=int(item["level"]),
            file=item["file"],
            tags=tuple(item.get("tags", ())),
            description=item.get("description", ""),
            small=dict(item.get("small", {})),
        )
        for item in data["problems"]
    ]


def load_bundled(entry: BundledEntry, size: str = "standard") -> Problem:
    return load_problem_file(
        bundled_root() / entry.file,
        problem_id=entry.id,
        level=entry.level,
        tags=entry.tags,
        set_name=BUNDLED,
        size=size,
        small_overrides=entry.small,
        description=entry.description,
    )


def bundled_problems(size: str = "standard") -> list[Problem]:
    return [load_bundled(entry, size) for entry in bundled_entries()]


def kernelbench_level_dirs(root: Path) -> dict[int, Path]:
    """The ``levelN`` folders of a KernelBench checkout (repo root or its KernelBench/ dir)."""
    for base in (root / "KernelBench", root):
        dirs = {
            int(p.name[5:]): p
            for p in sorted(base.glob("level*"))
            if p.is_dir() and p.name[5:].isdigit()
        }
        if dirs:
            return dirs
    return {}


def kernelbench_problems(
    root: Path, levels: tuple[int, ...] | None = None, size: str = "standard"
) -> list[Problem]:
    level_dirs = kernelbench_level_dirs(root)
    if not level_dirs:
        raise ProblemError(f"{root}: no KernelBench level folders (level1, level2, ...) found")
    problems: list[Problem] = []
    for level, folder in sorted(level_dirs.items()):
        if levels and level not in levels:
            continue
        for file in sorted(folder.glob("*.py"), key=_numeric_key):
            problems.append(
                load_problem_file(
                    file,
                    problem_id=f"L{level}_{file.stem}",
                    level=level,
                    set_name="kernelbench",
                    size=size,
                )
            )
    return problems


def folder_problems(folder: Path, size: str = "standard") -> list[Problem]:
    files = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not files:
        raise ProblemError(f"{folder}: no problem files (*.py) in this folder")
    return [load_problem_file(f, set_name=folder.name, size=size) for f in files]


def load_problem_set(
    spec: str, levels: tuple[int, ...] | None = None, size: str = "standard"
) -> list[Problem]:
    """``bundled``, a KernelBench checkout, a folder of problem files, one file, or a
    synthesised dataset (``.jsonl`` / ``.parquet``, or the synthesis run folder)."""
    if spec == BUNDLED:
        problems = bundled_problems(size)
        return [p for p in problems if not levels or p.level in levels]
    path = Path(spec).expanduser()
    if path.is_dir() and (path / DATASET_FILE).is_file():  # a synthesis run folder
        path = path / DATASET_FILE
    if path.is_file() and path.suffix in DATASET_SUFFIXES:
        return dataset_problems(path)
    if path.is_file():
        return [load_file(path, size)]
    if not path.is_dir():
        raise ProblemError(f"{spec}: neither 'bundled' nor an existing file or folder")
    if kernelbench_level_dirs(path):
        return kernelbench_problems(path, levels, size)
    return folder_problems(path, size)


def resolve_problem(spec: str, size: str = "standard") -> Problem:
    """A bundled problem id (e.g. ``relu``), the path of a problem file, or ``DATASET#id`` (a
    problem of a synthesised dataset file)."""
    entries = {e.id: e for e in bundled_entries()}
    if spec in entries:
        return load_bundled(entries[spec], size)
    file_part, sep, row_id = spec.rpartition("#")
    if sep and Path(file_part).suffix in DATASET_SUFFIXES:
        rows = {p.id: p for p in dataset_problems(Path(file_part).expanduser())}
        if row_id not in rows:
            raise ProblemError(f"{spec}: no problem {row_id!r} in {file_part}")
        return rows[row_id]
    path = Path(spec).expanduser()
    if path.suffix == ".py" or path.exists():
        return load_file(path, size)
    close = sorted(i for i in entries if spec.lower() in i.lower())
    hint = f" (did you mean: {', '.join(close)})" if close else " (see `cuda-agent problems list`)"
    raise ProblemError(f"{spec}: not a bundled problem id nor a file{hint}")


def load_file(path: Path, size: str) -> Problem:
    """One problem file; a bundled problem's own file loads as its id does (``--size small``
    applies the manifest's small sizes to a path as it does to an id)."""
    entry = bundled_entry_at(path)
    if entry is not None:
        return load_bundled(entry, size)
    return load_problem_file(path, size=size)


def bundled_entry_at(path: Path) -> BundledEntry | None:
    """The bundled problem whose file ``path`` is (None for any other file)."""
    try:
        target = path.resolve()
    except OSError:
        return None
    root = bundled_root()
    return next((e for e in bundled_entries() if (root / e.file).resolve() == target), None)


def problem_spec(problem: Problem) -> str:
    """What ``resolve_problem`` turns back into ``problem`` (same size, same source)."""
    if problem.set_name == BUNDLED:
        return problem.id
    if problem.path.suffix in DATASET_SUFFIXES:
        return f"{problem.path}#{problem.id}"
    return str(problem.path)


def _numeric_key(path: Path) -> tuple[int, str]:
    head = path.stem.split("_", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, path.stem)
