"""Our verdicts on Triton solutions beside KernelBench's triton backend's.

Usage: python benchmarks/triton_agreement.py OURS_RUN PEER

OURS_RUN is a ``bench run`` folder (``results.jsonl``); PEER is what
``python -m benchmarks.compat kernelbench SET --backend triton`` writes: ``SET/kernelbench.jsonl``
(or the SET folder holding it), one row per evaluation with ``id``, ``compiled``,
``correctness``, ``kind``, ``error``; a rerun's row of an id replaces the earlier one, as in
``benchmarks/compat/table.py``. Prints the agreement table of docs/compat.md: both accept, both
reject, and each way of disagreeing with the reason on our side (our failing stage and flags)
and the peer's kind, then the disagreements one per line. KernelBench's evaluation there is
untimed (``measure_performance=False``), so the speed-ups listed for solutions both accept are
ours (and the peer's only where its row has a ``speedup``). Reads files; runs nothing.
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any


def ours(folder: Path) -> dict[str, dict[str, Any]]:
    rows = {}
    for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            rows[row["problem_id"]] = row["result"]
    return rows


def peer(path: Path) -> dict[str, dict[str, Any]]:
    """The last row of each id of a kernelbench.jsonl (``path``, or ``path/kernelbench.jsonl``)."""
    if path.is_dir():
        path = path / "kernelbench.jsonl"
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if "id" in row:
                rows[str(row["id"])] = row
    return rows


def reason(result: dict[str, Any]) -> str:
    error = result.get("error") or {}
    flags = ",".join(result.get("flags") or [])
    return f"{error.get('stage', 'accepted')}" + (f" [{flags}]" if flags else "")


def main(argv: list[str]) -> int:
    mine, theirs = ours(Path(argv[0])), peer(Path(argv[1]))
    both = sorted(set(mine) & set(theirs))
    table: collections.Counter[str] = collections.Counter()
    lines = []
    for ident in both:
        a, b = bool(mine[ident].get("correct")), bool(theirs[ident].get("correctness"))
        if a == b:
            table["both accept" if a else "both reject"] += 1
            continue
        key = "ours accepts, KernelBench rejects" if a else "ours rejects, KernelBench accepts"
        why = f"{reason(mine[ident])} / {theirs[ident].get('kind')}"
        table[f"{key}: {why}"] += 1
        lines.append(f"  {ident}: {key} ({why}; {str(theirs[ident].get('error'))[:120]})")
    print(f"judged by both: {len(both)} (ours {len(mine)}, KernelBench {len(theirs)})")
    for key, count in sorted(table.items()):
        print(f"{count:>4}  {key}")
    sped = [
        (i, theirs[i].get("speedup"), mine[i].get("speedup_eager"))
        for i in both
        if mine[i].get("correct") and theirs[i].get("correctness")
    ]
    for ident, theirs_x, ours_x in sped[:10]:
        peer_x = f"KernelBench {theirs_x}, " if theirs_x is not None else ""
        print(f"  speed-up {ident}: {peer_x}ours {ours_x}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
