"""``prepare``: a CUDA-L1-style corpus (JSON lines) -> a problems folder, a solutions folder and
a manifest.

Each corpus row has ``level_id``, ``task_id``, ``ref_code`` (the KernelBench problem text the
solution was written against) and ``custom_code`` (the solution, or null). The problem is
written to ``problems/level<L>/<task>_<name>.py``, the layout of a KernelBench checkout, so
``cuda-agent`` reads the folder with ids ``L<L>_<task>_<name>``; ``<name>`` is the file stem
of the same problem number in a KernelBench checkout (``--kb``) or, without one, ``<task>``
alone. The solution goes to ``solutions/<id>.py``. Rows without a solution are not written
(counted in the manifest), nor are rows whose problem our loader rejects (listed with the
reason). Nothing here runs problem or solution code.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.problems.loader import load_problem_file

MANIFEST = "manifest.json"
PROBLEMS = "problems"
SOLUTIONS = "solutions"


@dataclass(frozen=True)
class Entry:
    level: int
    task: int
    ref_code: str
    custom_code: str | None


def read_corpus(path: Path) -> list[Entry]:
    """The rows of a corpus file; one line that is not a corpus row stops with its number."""
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            code = row.get("custom_code")
            entries.append(
                Entry(
                    int(row["level_id"]),
                    int(row["task_id"]),
                    str(row["ref_code"]),
                    str(code) if isinstance(code, str) and code.strip() else None,
                )
            )
        except (ValueError, KeyError, TypeError) as err:
            raise CudaAgentError(f"{path}:{number}: not a corpus row ({err})") from None
    return entries


def kernelbench_names(kb: Path | None) -> dict[tuple[int, int], str]:
    """(level, problem number) -> file stem in a KernelBench checkout (empty without one)."""
    if kb is None:
        return {}
    names: dict[tuple[int, int], str] = {}
    for folder in sorted((kb / "KernelBench").glob("level*")) or sorted(kb.glob("level*")):
        if not folder.name[5:].isdigit():
            continue
        for file in folder.glob("*.py"):
            head = file.stem.split("_", 1)[0]
            if head.isdigit():
                names[(int(folder.name[5:]), int(head))] = file.stem
    return names


def problem_stem(entry: Entry, names: dict[tuple[int, int], str]) -> str:
    stem = names.get((entry.level, entry.task), str(entry.task))
    return re.sub(r"[^A-Za-z0-9_]", "_", stem)


def prepare(
    corpus: Path, out: Path, kb: Path | None = None, levels: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """Write ``out/problems``, ``out/solutions`` and ``out/manifest.json``; the manifest."""
    entries = read_corpus(corpus)
    names = kernelbench_names(kb)
    problems, solutions = out / PROBLEMS, out / SOLUTIONS
    solutions.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "corpus": str(corpus),
        "set": corpus.stem,
        "rows": len(entries),
        "named_from_kernelbench": bool(names),
        "solutions": {},
        "no_solution": [],
        "problem_rejected": {},
    }
    for entry in entries:
        if levels and entry.level not in levels:
            continue
        stem = problem_stem(entry, names)
        pid = f"L{entry.level}_{stem}"
        if entry.custom_code is None:
            manifest["no_solution"].append(pid)
            continue
        folder = problems / f"level{entry.level}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{stem}.py"
        path.write_text(entry.ref_code, encoding="utf-8")
        try:
            load_problem_file(path)
        except CudaAgentError as err:
            path.unlink()
            manifest["problem_rejected"][pid] = str(err)
            continue
        (solutions / f"{pid}.py").write_text(entry.custom_code, encoding="utf-8")
        manifest["solutions"][pid] = {"level": entry.level, "task": entry.task}
    manifest["counts"] = {
        "solutions": len(manifest["solutions"]),
        "no_solution": len(manifest["no_solution"]),
        "problem_rejected": len(manifest["problem_rejected"]),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def read_manifest(set_dir: Path) -> dict[str, Any]:
    path = set_dir / MANIFEST
    if not path.is_file():
        raise CudaAgentError(f"{set_dir}: no {MANIFEST} (run `prepare` first)")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("solutions"), dict):
        raise CudaAgentError(f"{path}: not a compat manifest")
    return data
