"""A prepared corpus cut to its first N solutions (by id), as a problems and a solutions folder.

Usage: python benchmarks/corpus_subset.py SET N OUT [--interleave]

SET is a prepared set (``SET/problems/level<L>/<task>_<name>.py``, ``SET/solutions/<id>.py``,
as ``benchmarks/compat`` prepares them); OUT gets the same layout holding the N solutions
whose ids sort first (numerically by level and task) and their problems, and prints the ids
comma-separated (for a peer's ``--only``). ``--interleave`` takes them from the levels in turn
(the first of level 1, of level 2, of level 3, then the second of each...), so a cut of a
set of several levels holds all of them. Copies files; runs nothing.
"""

from __future__ import annotations

import itertools
import re
import shutil
import sys
from pathlib import Path


def sort_key(stem: str) -> tuple[int, int, str]:
    match = re.match(r"L(\d+)_(\d+)_", stem)
    return (int(match.group(1)), int(match.group(2)), stem) if match else (0, 0, stem)


def interleaved(stems: list[str]) -> list[str]:
    """``stems`` (sorted) taken from each level in turn."""
    levels = [list(group) for _, group in itertools.groupby(stems, key=lambda s: sort_key(s)[0])]
    turns = itertools.zip_longest(*levels)
    return [stem for turn in turns for stem in turn if stem is not None]


def main(argv: list[str]) -> int:
    flags = [a for a in argv if a.startswith("--")]
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 3 or any(f != "--interleave" for f in flags):
        print(__doc__)
        return 2
    source, count, out = Path(args[0]), int(args[1]), Path(args[2])
    stems = sorted((p.stem for p in (source / "solutions").glob("*.py")), key=sort_key)
    chosen = (interleaved(stems) if flags else stems)[:count]
    for sub in ("problems", "solutions"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "solutions").mkdir(parents=True)
    for ident in chosen:
        shutil.copy(source / "solutions" / f"{ident}.py", out / "solutions" / f"{ident}.py")
        level, task, name = re.match(r"L(\d+)_(\d+)_(.*)", ident).groups()  # type: ignore[union-attr]
        problem = source / "problems" / f"level{level}" / f"{task}_{name}.py"
        (out / "problems" / f"level{level}").mkdir(parents=True, exist_ok=True)
        shutil.copy(problem, out / "problems" / f"level{level}" / problem.name)
    print(",".join(chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
