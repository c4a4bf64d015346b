"""A synthesised dataset file (``dataset.jsonl`` / ``dataset.parquet``) read as a problem set.

Each row's ``code`` is a KernelBench-format problem; its ``id`` becomes the problem id and its
``data_source`` (``torch#2``, ...) a tag. Rows are checked statically like any problem file;
nothing here runs problem code. Problems keep the sizes they were synthesised at (the
``small`` size has no overrides to apply to them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import ProblemError
from cuda_agent.core.hashing import text_hash
from cuda_agent.core.types import Problem
from cuda_agent.problems.loader import first_docstring_line
from cuda_agent.problems.source import check_problem_source

DATASET_SUFFIXES = (".jsonl", ".parquet")
JSON_COLUMNS = ("inputs", "outputs")  # nested values kept as JSON text in parquet


def read_dataset(path: Path) -> list[dict[str, Any]]:
    """The rows of a dataset file, nested values decoded."""
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ProblemError(f"{path}: reading parquet needs pyarrow") from None
        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        for row in rows:
            for key in JSON_COLUMNS:
                if isinstance(row.get(key), str):
                    row[key] = json.loads(row[key])
        return rows
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ProblemError(f"{path}:{number}: not a JSON line ({err.msg})") from None
        rows.append(row)
    return rows


def dataset_problems(path: Path) -> list[Problem]:
    problems = []
    for number, row in enumerate(read_dataset(path), 1):
        if not isinstance(row, dict) or not isinstance(row.get("code"), str):
            raise ProblemError(f"{path}: row {number} has no 'code' column")
        problem_id = str(row.get("id") or f"{path.stem}_{number}")
        code = row["code"]
        check_problem_source(code, f"{path}:{problem_id}")
        problems.append(
            Problem(
                id=problem_id,
                path=path.resolve(),
                source=code,
                content_hash=text_hash(code),
                tags=(str(row.get("data_source", "")),) if row.get("data_source") else (),
                set_name=path.stem,
                description=first_docstring_line(code),
            )
        )
    if not problems:
        raise ProblemError(f"{path}: the dataset has no rows")
    return problems
