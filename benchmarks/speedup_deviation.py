"""How far from 1 a set of self-speed-ups lies: the timing-fidelity figure of one run.

A reference timed as its own candidate should be 1x its baseline; ``|1 - speed-up|`` over the
correct rows, its median and its worst, is how far timing strays. Read from either side's file:
a ``bench run`` folder's ``results.jsonl`` (``speedup_eager`` of each result) or the JSON that
``benchmarks/kernelbench_peer.py self-speedup`` writes (``results``, each with ``speedup``).
``benchmarks/self_speedup.py`` summarises its own rows with the same ``deviations``.

Usage: python benchmarks/speedup_deviation.py FILE   (prints one line for the recipe's row)
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def deviations(speedups: list[float | None]) -> list[float]:
    """``|1 - s|`` of every known speed-up, smallest first."""
    return sorted(abs(1.0 - s) for s in speedups if s)


def rows_and_speedups(path: Path) -> tuple[int, list[float | None]]:
    """The number of rows in ``path`` and the speed-ups of its correct ones."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows: list[dict[str, Any]] = [json.loads(x)["result"] for x in text.splitlines() if x]
        key = "speedup_eager"
    else:
        rows = json.loads(text)["results"]
        key = "speedup"
    return len(rows), [r.get(key) for r in rows if r.get("correct")]


def deviation_line(path: Path) -> str:
    problems, speedups = rows_and_speedups(path)
    dev = deviations(speedups)
    median = f"{statistics.median(dev):.4f}" if dev else "-"
    worst = f"{dev[-1]:.4f}" if dev else "-"
    return f"problems {problems} correct {len(dev)} median_abs_dev {median} worst_abs_dev {worst}"


if __name__ == "__main__":
    print(deviation_line(Path(sys.argv[1])))
