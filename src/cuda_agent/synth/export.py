"""Export a synthesis run: the dataset (JSONL and parquet), the rejected candidates, statistics.

Dataset columns are those of CUDA-Agent-Ops-6K, ``ops`` (the operator names, a list),
``data_source`` (``torch#2``: two torch operators; ``transformers#1``: one transformers
block) and ``code`` (the KernelBench-format problem), followed by our metadata: ``id``,
``seed``, ``composer``, ``input_shape``, ``output_shape``, ``inputs`` / ``outputs`` (shapes and
dtypes as the worker saw them), ``parameters``, ``eager_ms``, ``compile_ms``, ``similarity`` and
``closest`` (the nearest benchmark problem), ``backend``.

``stats.json`` holds the composition table (shares of 1..5-op and transformers problems, as
the paper's Table 3), the acceptance of each filter (how many candidates reached it and how
many it let through), the similarity distribution against the benchmark set, runtimes, and
throughput (accepted problems per minute of wall time over all sessions of the run).
Nothing here runs problem code.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from cuda_agent.core.jsonl import read_lines
from cuda_agent.problems.dataset import JSON_COLUMNS
from cuda_agent.synth.filters import ALL_FILTERS
from cuda_agent.synth.run import CONFIG_FILE, SESSIONS_FILE, read_verdicts

DATASET_JSONL = "dataset.jsonl"
DATASET_PARQUET = "dataset.parquet"
REJECTED_FILE = "rejected.jsonl"
STATS_FILE = "stats.json"
COLUMNS = (
    "ops",
    "data_source",
    "code",
    "id",
    "seed",
    "composer",
    "input_shape",
    "output_shape",
    "inputs",
    "outputs",
    "parameters",
    "eager_ms",
    "compile_ms",
    "similarity",
    "closest",
    "backend",
)
SIMILARITY_BINS = 10


def dataset_row(verdict: dict[str, Any], backend: str) -> dict[str, Any]:
    row = {name: verdict.get(name) for name in COLUMNS}
    row["code"] = verdict["source"]
    row["backend"] = backend
    return row


def export_run(out: Path, parquet: bool = True) -> dict[str, Any]:
    """Write the dataset, ``rejected.jsonl`` and ``stats.json``; returns the statistics."""
    config = json.loads((out / CONFIG_FILE).read_text(encoding="utf-8"))
    verdicts = read_verdicts(out)
    backend = str(config.get("backend", "cpu"))
    accepted = [dataset_row(v, backend) for v in verdicts if v.get("accepted")]
    _write_jsonl(out / DATASET_JSONL, accepted)
    _write_jsonl(out / REJECTED_FILE, [v for v in verdicts if not v.get("accepted")])
    wrote_parquet = False
    if parquet:
        wrote_parquet = write_parquet(out / DATASET_PARQUET, accepted)
    stats = run_stats(verdicts, read_lines(out / SESSIONS_FILE), config)
    stats["files"] = {
        "jsonl": DATASET_JSONL,
        "parquet": DATASET_PARQUET if wrote_parquet else None,
        "rejected": REJECTED_FILE,
    }
    (out / STATS_FILE).write_text(json.dumps(stats, indent=1), encoding="utf-8")
    return stats


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> bool:
    """The dataset as parquet (False when pyarrow is not installed: JSONL only)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    columns = {
        name: [json.dumps(r.get(name)) if name in JSON_COLUMNS else r.get(name) for r in rows]
        for name in COLUMNS
    }
    pq.write_table(pa.table(columns), path)
    return True


def run_stats(
    verdicts: list[dict[str, Any]], sessions: list[dict[str, Any]], config: dict[str, Any]
) -> dict[str, Any]:
    accepted = [v for v in verdicts if v.get("accepted")]
    wall_s = sum(float(s.get("wall_s", 0.0)) for s in sessions)
    eager = [float(v["eager_ms"]) for v in accepted if v.get("eager_ms") is not None]
    speedups = [
        float(v["eager_ms"]) / float(v["compile_ms"])
        for v in accepted
        if v.get("eager_ms") and v.get("compile_ms")
    ]
    return {
        "config": config,
        "candidates": len(verdicts),
        "accepted": len(accepted),
        "acceptance_rate": round(len(accepted) / len(verdicts), 4) if verdicts else 0.0,
        "filters": filter_table(verdicts),
        "rejections_by_reason": _top_reasons(verdicts),
        "composition": composition(accepted),
        "similarity": similarity_stats(verdicts, float(config.get("threshold", 0.9))),
        "eager_ms": _summary(eager),
        "compile_speedup_over_eager": _summary(speedups),
        "throughput": {
            "wall_s": round(wall_s, 2),
            "sessions": len(sessions),
            "accepted_per_minute": round(len(accepted) / (wall_s / 60.0), 2) if wall_s else None,
            "candidates_per_minute": round(len(verdicts) / (wall_s / 60.0), 2) if wall_s else None,
        },
    }


def filter_table(verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per filter, in the order they apply: candidates that reached it, passed and rejected."""
    rejected = Counter(str(v.get("filter")) for v in verdicts if not v.get("accepted"))
    reached = len(verdicts)
    table = []
    for name in ALL_FILTERS:
        dropped = rejected.get(name, 0)
        table.append(
            {
                "filter": name,
                "reached": reached,
                "rejected": dropped,
                "passed": reached - dropped,
                "pass_rate": round((reached - dropped) / reached, 4) if reached else None,
            }
        )
        reached -= dropped
    return table


def composition(accepted: list[dict[str, Any]]) -> dict[str, Any]:
    """Shares of the paper's Table 3 categories among accepted problems."""
    counts = Counter(str(v.get("data_source")) for v in accepted)
    order = [f"torch#{k}" for k in range(1, 6)] + ["transformers#1"]
    keys = order + sorted(k for k in counts if k not in order)
    total = len(accepted)
    return {
        k: {"count": counts.get(k, 0), "share": round(counts.get(k, 0) / total, 4) if total else 0}
        for k in keys
    }


def similarity_stats(verdicts: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    values = [float(v["similarity"]) for v in verdicts if v.get("similarity") is not None]
    if not values:
        return {"scored": 0}
    bins = [0] * SIMILARITY_BINS
    for value in values:
        bins[min(SIMILARITY_BINS - 1, int(value * SIMILARITY_BINS))] += 1
    return {
        "scored": len(values),
        "threshold": threshold,
        "above_threshold": sum(1 for v in values if v > threshold),
        "histogram": {
            f"{i / SIMILARITY_BINS:.1f}-{(i + 1) / SIMILARITY_BINS:.1f}": n
            for i, n in enumerate(bins)
        },
        **_summary(values),
    }


def _summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(values),
        "min": round(ordered[0], 4),
        "median": round(statistics.median(ordered), 4),
        "mean": round(statistics.fmean(ordered), 4),
        "max": round(ordered[-1], 4),
    }


def _top_reasons(verdicts: list[dict[str, Any]], limit: int = 20) -> list[dict[str, Any]]:
    counts = Counter(
        (str(v.get("filter")), _reason_kind(str(v.get("reason", ""))))
        for v in verdicts
        if not v.get("accepted")
    )
    return [{"filter": f, "reason": r, "count": n} for (f, r), n in counts.most_common(limit)]


def _reason_kind(reason: str) -> str:
    """The reason without its numbers and names, so that alike rejections count together."""
    head = reason.split(":")[0] if reason.startswith(("task lint", "torch.compile")) else reason
    return " ".join(w for w in head.split()[:8] if not any(c.isdigit() for c in w))


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    tmp.replace(path)
