"""KernelBench verdicts read from a results file, keyed by our problem ids.

Two formats are read:

* KernelBench's own ``eval_results.json`` (``scripts/eval_from_generations.py``): a JSON object
  keyed by the problem's number within one level, each value a list of samples (or, in older
  versions, one sample) ``{"sample_id", "compiled", "correctness", "metadata", "runtime", ...}``.
  The file does not name its level: it is given, or inferred when our run has one level. A
  problem's verdict is its best sample (a correct one, else the first). A folder holding
  ``eval_results.json`` is accepted too.
* the JSON lines of ``benchmarks/compat`` (``kernelbench`` step): one object per solution with
  our problem ``id``, ``compiled``, ``correctness``, ``kind``, ``error`` and ``stock_build``
  (whether stock ``load_inline`` built what the solution asked for: KernelBench's
  ``compiled`` is true for a solution that caught its failed build and ran PyTorch instead);
  newer rows also carry ``correct_at`` (the verdict at each tolerance asked for, keyed by
  ``tolerance_key``; ``correctness`` is the one at the primary tolerance, ``tolerance``) and
  ``reference_error`` (KernelBench's reference model raised, on the inputs it made for it).

``their_verdicts`` returns ``{our problem id: TheirVerdict}``; ``kind`` names why KernelBench
rejected (``build``, ``runtime``, ``shape``, ``mismatch``, ``timeout``, ``crash``, ``no_result``,
``incorrect``) and is empty for an accepted solution. Nothing here evaluates anything.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.jsonl import read_lines

KB_RESULTS_FILE = "eval_results.json"
MAX_MESSAGE = 300
_NUMBER = re.compile(r"^(?:L(\d+)_)?(\d+)(?:_|$)")


@dataclass(frozen=True)
class TheirVerdict:
    compiled: bool
    correct: bool
    kind: str = ""
    message: str = ""
    max_difference: float | None = None
    stock_build: str | None = None  # ok / failed / none (no build asked); None: not known
    stock_build_error: str = ""
    # the verdict at each tolerance evaluated (tolerance_key -> correct); None: only the primary
    correct_at: dict[str, bool] | None = None
    tolerance: str | None = None  # tolerance_key of the primary verdict, where known
    max_difference_at: dict[str, float] | None = None  # where a mismatch was measured
    reference_error: str = ""  # KernelBench's own reference raised (on its inputs)

    def label(self) -> str:
        if self.correct:
            return "correct"
        return f"rejected ({self.kind})" if self.kind else "rejected"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def correct_at_key(self, key: str) -> bool | None:
        """The verdict at tolerance ``key`` (None: not evaluated there)."""
        if self.correct_at is None:
            return self.correct if key == self.tolerance else None
        return self.correct_at.get(key)


def tolerance_key(value: float | str | None) -> str:
    """How a tolerance names its verdict in ``correct_at``: ``0.01``, ``0.0001``; ``native``
    (None) for KernelBench's own precision-derived tolerance."""
    if value is None or value == "native":
        return "native"
    return repr(float(value))


def problem_number(problem_id: str) -> tuple[int | None, int | None]:
    """(level, number) of an id such as ``L1_19_ReLU`` (1, 19) or ``19_ReLU`` (None, 19)."""
    match = _NUMBER.match(problem_id)
    if not match:
        return None, None
    level = int(match.group(1)) if match.group(1) else None
    return level, int(match.group(2))


def their_verdicts(
    path: Path, ours: dict[str, int | None], level: int | None = None
) -> dict[str, TheirVerdict]:
    """KernelBench's verdicts in ``path`` for our problems ``ours`` (id -> level)."""
    path = Path(path)
    if path.is_dir() and (path / KB_RESULTS_FILE).is_file():
        path = path / KB_RESULTS_FILE
    if not path.is_file():
        raise CudaAgentError(f"{path}: no such KernelBench results file")
    if path.suffix == ".jsonl":
        return {str(row["id"]): compat_verdict(row) for row in read_lines(path) if "id" in row}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise CudaAgentError(f"{path}: not a KernelBench results file ({err})") from None
    if not isinstance(data, dict) or not all(str(k).isdigit() for k in data):
        raise CudaAgentError(
            f"{path}: not a KernelBench eval_results.json (expected problem numbers as keys)"
        )
    level = level if level is not None else _only_level(ours, path)
    by_number = {
        number: pid
        for pid, lv in ours.items()
        for id_level, number in [problem_number(pid)]
        if number is not None and (lv if lv is not None else id_level) == level
    }
    verdicts = {}
    for key, samples in data.items():
        pid = by_number.get(int(key), f"L{level}_{int(key)}")
        verdicts[pid] = kb_sample_verdict(_best_sample(samples))
    return verdicts


def _only_level(ours: dict[str, int | None], path: Path) -> int:
    levels = {lv for lv in ours.values() if lv is not None}
    if len(levels) == 1:
        return levels.pop()
    found = re.search(r"level_?(\d+)", str(path), re.IGNORECASE)
    if found:
        return int(found.group(1))
    raise CudaAgentError(
        f"{path}: KernelBench results are per level and this run has levels "
        f"{sorted(levels) or 'none'}: give --kb-level N"
    )


def _best_sample(samples: Any) -> dict[str, Any]:
    if isinstance(samples, dict):
        return samples
    items = [s for s in samples if isinstance(s, dict)] if isinstance(samples, list) else []
    if not items:
        return {}
    return next((s for s in items if s.get("correctness")), items[0])


def kb_sample_verdict(sample: dict[str, Any]) -> TheirVerdict:
    """One KernelBench ``KernelExecResult`` (as its eval scripts write it) as a verdict."""
    raw = sample.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    compiled, correct = bool(sample.get("compiled")), bool(sample.get("correctness"))
    if correct:
        return TheirVerdict(compiled, True)
    if not sample:
        return TheirVerdict(False, False, "no_result", "no sample in the results file")
    for key, kind in (
        ("compilation_error", "build"),
        ("runtime_error", "runtime"),
        ("correctness_issue", "mismatch"),
    ):
        if meta.get(key):
            text = _one_line(str(meta[key]))
            if kind == "mismatch" and "shape" in text.lower():
                kind = "shape"
            return TheirVerdict(compiled, False, kind, text, _max_difference(meta))
    return TheirVerdict(compiled, False, "build" if not compiled else "incorrect")


def compat_verdict(row: dict[str, Any]) -> TheirVerdict:
    """A row of ``benchmarks/compat``'s KernelBench JSON lines as a verdict (rows written
    before ``correct_at`` and ``reference_error`` existed read as before)."""
    correct = bool(row.get("correctness"))
    raw = row.get("correct_at")
    correct_at = {str(k): bool(v) for k, v in raw.items()} if isinstance(raw, dict) else None
    return TheirVerdict(
        compiled=bool(row.get("compiled")),
        correct=correct,
        kind="" if correct else str(row.get("kind") or "incorrect"),
        message=_one_line(str(row.get("error") or "")),
        max_difference=_max_difference(row),
        stock_build=str(row["stock_build"]) if row.get("stock_build") else None,
        stock_build_error=_one_line(str(row.get("stock_build_error") or "")),
        correct_at=correct_at,
        max_difference_at=_differences(row.get("max_difference_at")),
        tolerance=tolerance_key(row.get("tolerance")) if "tolerance" in row else None,
        reference_error=_one_line(str(row.get("reference_error") or "")),
    )


def _differences(raw: Any) -> dict[str, float] | None:
    if not isinstance(raw, dict):
        return None
    numbers = {str(k): _number(v) for k, v in raw.items()}
    return {k: v for k, v in numbers.items() if v is not None}


def _max_difference(meta: dict[str, Any]) -> float | None:
    values = meta.get("max_difference")
    if not isinstance(values, list):
        values = [values]
    numbers = [n for n in (_number(v) for v in values) if n is not None]
    return max(numbers) if numbers else None


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 1] + "…"
