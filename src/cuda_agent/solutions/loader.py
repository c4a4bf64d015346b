"""Load a candidate solution from disk into an immutable ``Solution`` snapshot.

Two shapes: a ``.py`` file (KernelBench single file defining ``ModelNew``) or a folder with
``model_new.py`` (CUDA-Agent workdir, kernels under ``kernels/``). Only source-like files are
snapshotted, with limits on count and size; build outputs and caches are skipped.
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.core.errors import SolutionError
from cuda_agent.core.hashing import files_hash, normalise_text
from cuda_agent.core.types import Solution, SolutionKind

SNAPSHOT_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh", ".inl")
SKIPPED_DIRS = {"build", "__pycache__", ".git", ".cuda_agent", ".ipynb_checkpoints", "utils"}
MAX_FILES = 200
MAX_BYTES = 4 * 1024 * 1024
WORKDIR_ENTRY = "model_new.py"


def load_solution(path: Path | str) -> Solution:
    path = Path(path).expanduser()
    if not path.exists():
        raise SolutionError(f"{path}: no such file or folder")
    if path.is_file():
        if path.suffix != ".py":
            raise SolutionError(
                f"{path}: a solution file must be a .py file (KernelBench ModelNew)"
            )
        files = {path.name: _read(path)}
        return Solution(SolutionKind.SINGLE_FILE, path.resolve(), files, files_hash(files.items()))
    if not (path / WORKDIR_ENTRY).is_file():
        raise SolutionError(f"{path}: not a workdir (no {WORKDIR_ENTRY} in it)")
    files = {}
    total = 0
    for file in sorted(_walk(path)):
        rel = file.relative_to(path).as_posix()
        text = _read(file)
        total += len(text)
        files[rel] = text
        if len(files) > MAX_FILES or total > MAX_BYTES:
            raise SolutionError(
                f"{path}: too many or too large source files (limit {MAX_FILES} files, "
                f"{MAX_BYTES // (1024 * 1024)} MiB)"
            )
    return Solution(SolutionKind.WORKDIR, path.resolve(), files, files_hash(files.items()))


def _walk(root: Path) -> list[Path]:
    found = []
    for item in root.iterdir():
        if item.is_symlink():
            continue
        if item.is_dir():
            if item.name not in SKIPPED_DIRS and not item.name.startswith("."):
                found.extend(_walk(item))
        elif item.suffix in SNAPSHOT_SUFFIXES:
            found.append(item)
    return found


def _read(path: Path) -> str:
    try:
        return normalise_text(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise SolutionError(f"{path}: not UTF-8 text") from None
    except OSError as err:
        raise SolutionError(f"{path}: cannot read ({err.strerror})") from None
