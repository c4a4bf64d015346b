"""The curriculum's problem set: elementwise problems in train and held-out splits.

``build_problem_set(folder, spec)`` writes a folder that loads as a problem set, like a
synthesis run's export:

* ``train.jsonl`` and ``heldout.jsonl``: one row per problem, with the synthesised dataset's
  columns (``id``, ``code``: a KernelBench-format file; ``data_source``: ``curriculum#2`` for
  two ops; ``ops``, ``seed``, ``similarity``, ``closest``) and the curriculum's own:
  ``split``, ``torch_expr`` (what ``Model.forward`` returns) and ``answer`` (the reference C
  expression of the fill-in task). ``FOLDER/train.jsonl#ID`` names one problem anywhere a
  problem spec is taken (``problems.sets.resolve_problem``);
* ``rejected.jsonl`` (every candidate dropped, with the filter and the reason), ``stats.json``
  and ``config.json`` (the spec).

Candidate ``i`` is ``ops.compose(seed + i)``. The split is made the way the synthesis pipeline
keeps its training data away from the benchmark (``synth/filters.py``, docs/synthesis.md):
the held-out problems are drawn first, from the candidates whose hash falls in the held-out
share, through the static filters (well formed, unique, and decontaminated against the
benchmark sets, by default the bundled set); then every other candidate goes through the same
filters with the held-out problems added to the benchmark: a train problem is neither the same
code nor the same structure (the same ops with other constants) as a held-out one, nor more
similar to any held-out or benchmark problem than the threshold (AST similarity, 0.9 as in
synthesis). So held-out problems measure what training did not show.

``problem_set_folder(spec)`` is the set for a spec in ``$CUDA_AGENT_CACHE/curriculum/<digest>``,
built on first use (seconds: nothing is run, only parsed) and renamed into place atomically.

What it does not do: run the problems (the reference answers are checked by a test that
compiles them all; the evaluator runs each problem when it scores an answer), or apply the
synthesis pipeline's execution filters.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import cache_root
from cuda_agent.core.published import build_once
from cuda_agent.rl.curriculum.ops import OPS, Composition, compose
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.filters import DEFAULT_THRESHOLD, StaticFilters

VERSION = 1  # raise when the problems written for a spec change
SPLITS = ("train", "heldout")
SIZES = {"small": (256, 1024), "standard": (8192, 8192)}  # (batch_size, dim) of x
MAX_CANDIDATES = 5000

PROBLEM_TEMPLATE = '''\
"""Curriculum problem {id}: y = {torch_expr}, elementwise.

{n_ops} operator(s) ({ops}) over a 2-D float32 tensor of {batch_size} x {dim}.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = {batch_size}
dim = {dim}


class Model(nn.Module):
    """y = {torch_expr}, for every element x."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {torch_expr}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


class CurriculumError(CudaAgentError):
    """A curriculum spec or folder that cannot be used."""


@dataclass(frozen=True)
class CurriculumSpec:
    n_train: int = 48
    n_heldout: int = 16
    seed: int = 0
    size: str = "small"
    heldout_share: float = 0.25  # of the candidates offered to the held-out split first
    threshold: float = DEFAULT_THRESHOLD
    decontaminate_against: tuple[str, ...] = ("bundled",)

    def check(self) -> CurriculumSpec:
        if self.size not in SIZES:
            raise CurriculumError(f"curriculum size {self.size!r}: choose from {', '.join(SIZES)}")
        if self.n_train < 1 or self.n_heldout < 1:
            raise CurriculumError("a curriculum needs at least one train and one held-out problem")
        if not 0.0 < self.heldout_share < 1.0:
            raise CurriculumError("curriculum heldout_share must be between 0 and 1")
        return self

    def digest(self) -> str:
        ops = [(op.name, op.torch, op.c, op.constants) for op in OPS]
        key = json.dumps([VERSION, asdict(self), ops, PROBLEM_TEMPLATE], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:12]


def problem_source(problem_id: str, composition: Composition, size: str) -> str:
    batch_size, dim = SIZES[size]
    return PROBLEM_TEMPLATE.format(
        id=problem_id,
        torch_expr=composition.torch_expr,
        n_ops=len(composition.steps),
        ops=", ".join(composition.ops),
        batch_size=batch_size,
        dim=dim,
    )


def in_heldout_share(seed: int, index: int, share: float) -> bool:
    """Whether candidate ``index`` is offered to the held-out split (a hash, not the order)."""
    digest = hashlib.sha256(f"curriculum-split:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def build_problem_set(folder: Path, spec: CurriculumSpec) -> dict[str, Any]:
    """Write the problem set of ``spec`` into ``folder`` (see the module docstring); returns
    the statistics written to ``stats.json``."""
    spec.check()
    benchmark = _benchmark_sources(spec.decontaminate_against)
    rows: dict[str, list[dict[str, Any]]] = {split: [] for split in SPLITS}
    rejected: list[dict[str, Any]] = []
    candidates = [(i, compose(spec.seed + i)) for i in range(MAX_CANDIDATES)]
    offered = {i for i, _ in candidates if in_heldout_share(spec.seed, i, spec.heldout_share)}

    heldout_filters = StaticFilters(Decontaminator(benchmark), spec.threshold)
    for index, composition in candidates:
        if index in offered and len(rows["heldout"]) < spec.n_heldout:
            _offer(index, composition, "heldout", heldout_filters, spec, rows, rejected)
    train_filters = StaticFilters(
        Decontaminator({**benchmark, **{r["id"]: r["code"] for r in rows["heldout"]}}),
        spec.threshold,
    )
    for row in rows["heldout"]:  # the same code or structure as a held-out problem: refused
        train_filters.remember(row["id"], row["code"])
    for index, composition in candidates:
        if index not in offered and len(rows["train"]) < spec.n_train:
            _offer(index, composition, "train", train_filters, spec, rows, rejected)
    for split, wanted in (("train", spec.n_train), ("heldout", spec.n_heldout)):
        if len(rows[split]) < wanted:
            raise CurriculumError(
                f"curriculum: only {len(rows[split])} {split} problems pass the filters "
                f"among {MAX_CANDIDATES} candidates ({wanted} asked for)"
            )
    stats = _stats(rows, rejected, spec)
    folder.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        _write_jsonl(folder / f"{split}.jsonl", rows[split])
    _write_jsonl(folder / "rejected.jsonl", rejected)
    (folder / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
    config = {"version": VERSION, **asdict(spec)}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return stats


def problem_set_folder(spec: CurriculumSpec | None = None) -> Path:
    """The folder of ``spec``'s problem set in the cache, built there first if missing."""
    spec = (spec or CurriculumSpec()).check()
    folder = cache_root() / "curriculum" / f"elementwise-{spec.digest()}"
    return build_once(folder, lambda path: build_problem_set(path, spec))


def read_split(folder: Path, split: str) -> list[dict[str, Any]]:
    """The rows of one split of a curriculum folder."""
    if split not in SPLITS:
        raise CurriculumError(f"curriculum split {split!r}: choose from {', '.join(SPLITS)}")
    path = folder / f"{split}.jsonl"
    if not path.is_file():
        raise CurriculumError(f"{folder}: not a curriculum folder (no {path.name})")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def row_spec(folder: Path, row: dict[str, Any]) -> str:
    """The problem spec (``FILE#id``) of a row, for ``resolve_problem``."""
    return f"{folder / (str(row['split']) + '.jsonl')}#{row['id']}"


def _offer(
    index: int,
    composition: Composition,
    split: str,
    filters: StaticFilters,
    spec: CurriculumSpec,
    rows: dict[str, list[dict[str, Any]]],
    rejected: list[dict[str, Any]],
) -> None:
    problem_id = f"ew_{spec.seed + index:05d}"
    code = problem_source(problem_id, composition, spec.size)
    verdict = filters.check(problem_id, code)
    if not verdict.passed:
        rejected.append(
            {
                "id": problem_id,
                "split": split,
                "filter": verdict.filter,
                "reason": verdict.reason,
                "torch_expr": composition.torch_expr,
            }
        )
        return
    rows[split].append(
        {
            "id": problem_id,
            "code": code,
            "data_source": f"curriculum#{len(composition.steps)}",
            "split": split,
            "ops": composition.ops,
            "torch_expr": composition.torch_expr,
            "answer": composition.c_expr,
            "seed": spec.seed + index,
            "similarity": verdict.similarity,
            "closest": verdict.closest,
        }
    )


def _benchmark_sources(sets: tuple[str, ...]) -> dict[str, str]:
    from cuda_agent.problems.sets import load_problem_set

    sources: dict[str, str] = {}
    for spec in sets:
        for problem in load_problem_set(spec):
            sources[f"{spec}:{problem.id}"] = problem.source
    return sources


def _stats(
    rows: dict[str, list[dict[str, Any]]], rejected: list[dict[str, Any]], spec: CurriculumSpec
) -> dict[str, Any]:
    out: dict[str, Any] = {"spec": asdict(spec), "splits": {}, "rejected": {}}
    for split in SPLITS:
        similarities = sorted(float(r["similarity"] or 0.0) for r in rows[split])
        ops_count: dict[str, int] = {}
        for row in rows[split]:
            ops_count[str(len(row["ops"]))] = ops_count.get(str(len(row["ops"])), 0) + 1
        out["splits"][split] = {
            "problems": len(rows[split]),
            "ops_per_problem": ops_count,
            "max_similarity": similarities[-1] if similarities else None,
            "median_similarity": similarities[len(similarities) // 2] if similarities else None,
        }
    for item in rejected:
        key = f"{item['split']}:{item['filter']}"
        out["rejected"][key] = out["rejected"].get(key, 0) + 1
    return out


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
    path.write_text(text, encoding="utf-8")
