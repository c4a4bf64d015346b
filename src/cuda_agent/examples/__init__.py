"""Bundled example solutions (written for this project) for a few bundled problems.

Layout: ``examples/<problem_id>/<backend>.py`` (KernelBench single file) or
``examples/<problem_id>/<backend>/`` (workdir with ``model_new.py`` and ``kernels/``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def examples_root() -> Path:
    return Path(str(resources.files("cuda_agent.examples")))


def example_solutions(backend: str) -> list[tuple[str, Path]]:
    """``(problem_id, solution_path)`` for every example written for ``backend``."""
    found = []
    for folder in sorted(p for p in examples_root().iterdir() if p.is_dir()):
        if folder.name.startswith("_"):
            continue
        single, workdir = folder / f"{backend}.py", folder / backend
        if single.is_file():
            found.append((folder.name, single))
        elif (workdir / "model_new.py").is_file():
            found.append((folder.name, workdir))
    return found
