"""``from-runs``: one KernelBench "runs" folder -> CUDA-L1-style JSON lines for ``prepare``.

A runs folder is what KernelBench's generate/eval scripts write: one file per generated
kernel, ``level_{L}_problem_{P}_sample_{S}_kernel.py``, and, when its evaluation was run, a
results JSON (``eval_results.json``: ``{"<problem>": {"sample_id", "compiled",
"correctness", "runtime", "metadata", ...}}``, or a list of such records per problem). Each
kernel file becomes one row ``{"level_id", "task_id", "ref_code", "custom_code"}`` (the rows
``benchmarks/compat/corpus.py`` reads), with ``sample_id`` and ``source`` (the kernel file's
name); ``ref_code`` is ``KernelBench/level{L}/{P}_*.py`` of a KernelBench checkout. When the
folder has a recorded verdict for the row's problem and sample, it is carried under
``kb_recorded`` (``compiled``, ``correctness``, ``runtime``, ``speedup``, ``hardware``,
``correctness_trials``, whichever the file holds), so our verdicts can be set beside the
recorded ones. The results file is keyed by problem number alone, so it is used only when
every kernel file of the folder is of one level.

This reads files only: no kernel, problem or KernelBench code is imported or run. It does not
fetch the corpora (see docs/compat.md for the commands) and does not judge the solutions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError

KERNEL = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
RESULT_NAMES = ("eval_results.json", "eval_result.json", "results.json")
RECORDED_KEYS = ("compiled", "correctness", "runtime", "speedup", "ref_runtime")


def kernel_files(runs: Path) -> list[tuple[int, int, int, Path]]:
    """(level, problem, sample, path) of every generated kernel file, in problem order."""
    if not runs.is_dir():
        raise CudaAgentError(f"{runs}: no such runs folder")
    found = []
    for path in runs.iterdir():
        match = KERNEL.match(path.name)
        if match and path.is_file():
            level, problem, sample = (int(g) for g in match.groups())
            found.append((level, problem, sample, path))
    if not found:
        raise CudaAgentError(
            f"{runs}: no kernel files (level_<L>_problem_<P>_sample_<S>_kernel.py)"
        )
    return sorted(found, key=lambda f: f[:3])


def reference_files(kb: Path) -> dict[tuple[int, int], Path]:
    """(level, problem number) -> ``KernelBench/level<L>/<P>_*.py`` of a checkout."""
    root = kb / "KernelBench"
    if not root.is_dir():
        raise CudaAgentError(f"{kb}: not a KernelBench checkout (no KernelBench/ folder)")
    refs: dict[tuple[int, int], Path] = {}
    for folder in root.glob("level*"):
        if not folder.is_dir() or not folder.name[5:].isdigit():
            continue
        for file in folder.glob("*.py"):
            head = file.stem.split("_", 1)[0]
            if head.isdigit():
                refs[(int(folder.name[5:]), int(head))] = file
    return refs


def recorded_verdicts(runs: Path) -> tuple[str | None, dict[tuple[int, int], dict[str, Any]]]:
    """The results file's name and (problem, sample) -> its recorded verdict (empty without)."""
    for name in RESULT_NAMES:
        path = runs / name
        if path.is_file():
            break
    else:
        return None, {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise CudaAgentError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise CudaAgentError(f"{path}: not a KernelBench results file (expected an object)")
    verdicts: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in data.items():
        if not str(key).isdigit():
            continue
        records = value if isinstance(value, list) else [value]
        for record in records:
            if isinstance(record, dict):
                sample = int(record.get("sample_id", 0) or 0)
                verdicts[(int(key), sample)] = recorded(record)
    return path.name, verdicts


def recorded(record: dict[str, Any]) -> dict[str, Any]:
    """The verdict fields of one KernelBench result record."""
    out = {k: record[k] for k in RECORDED_KEYS if k in record}
    meta = record.get("metadata")
    if isinstance(meta, dict):
        for key in ("hardware", "correctness_trials"):
            if key in meta:
                out[key] = meta[key]
        errors = [k for k in meta if "error" in k]
        if errors:
            out["error_keys"] = sorted(errors)
    return out


def convert(runs: Path, kb: Path, level: int | None = None) -> list[dict[str, Any]]:
    """The corpus rows of a runs folder (``level``: only kernel files of that level)."""
    files = kernel_files(runs)
    if level is not None:
        files = [f for f in files if f[0] == level]
        if not files:
            raise CudaAgentError(f"{runs}: no level {level} kernel files")
    refs = reference_files(kb)
    results_name, verdicts = recorded_verdicts(runs)
    if len({f[0] for f in kernel_files(runs)}) > 1:
        # the results file is keyed by problem number alone: one level per run folder
        results_name, verdicts = None, {}
    rows = []
    for lvl, problem, sample, path in files:
        ref = refs.get((lvl, problem))
        if ref is None:
            raise CudaAgentError(
                f"{path.name}: no problem {problem} in {kb}/KernelBench/level{lvl}"
            )
        row: dict[str, Any] = {
            "level_id": lvl,
            "task_id": problem,
            "sample_id": sample,
            "source": path.name,
            "ref_code": ref.read_text(encoding="utf-8"),
            "custom_code": path.read_text(encoding="utf-8"),
        }
        if results_name is not None:
            row["kb_recorded"] = verdicts.get((problem, sample))
            row["kb_recorded_file"] = results_name
        rows.append(row)
    return rows


def write_rows(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """Write the rows as JSON lines; a summary (rows, with a recorded verdict, correct)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    recorded_rows = [r["kb_recorded"] for r in rows if r.get("kb_recorded")]
    return {
        "out": str(out),
        "rows": len(rows),
        "recorded": len(recorded_rows),
        "recorded_correct": sum(1 for r in recorded_rows if r.get("correctness") is True),
    }
