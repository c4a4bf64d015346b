"""The curriculum's problem set: problems of one or more families in train and held-out splits.

``build_problem_set(folder, spec)`` writes a folder that loads as a problem set, like a
synthesis run's export:

* ``train.jsonl`` and ``heldout.jsonl``: one row per problem, with the synthesised dataset's
  columns (``id``, ``code``: a KernelBench-format file; ``data_source``: ``curriculum#2`` for
  two elementwise ops, ``curriculum-rowwise#3`` for three ops of a row-wise problem; ``ops``,
  ``seed``, ``similarity``, ``closest``) and the curriculum's own: ``split``, ``family``
  (``families``), ``torch_expr`` (what ``Model.forward`` returns) and ``answer`` (the
  reference C expression of the fill-in task; null for row-wise and reduction problems, which
  have no fill-in task: ``reference.reference_kernel`` writes any problem's kernel).
  ``FOLDER/train.jsonl#ID`` names one problem anywhere a problem spec is taken
  (``problems.sets.resolve_problem``);
* ``rejected.jsonl`` (every candidate dropped, with the filter and the reason), ``stats.json``
  (with each split's count per family) and ``config.json`` (the spec).

``spec.families`` (default ``("elementwise",)``) names the families; candidate ``i`` belongs
to family ``families[i % len(families)]`` and is ``families.draw(family, seed + i)``, with id
``PREFIX_{seed + i:05d}`` (so ``ew_00012`` is the same problem in every set of one size), and
each split takes an equal share of every family (the first families take the remainder). The
split is made the way the synthesis pipeline keeps its training data away from the benchmark
(``synth/filters.py``, docs/synthesis.md): the held-out problems are drawn first, from the
candidates whose hash falls in the held-out share, through the static filters (well formed,
unique, and decontaminated against the benchmark sets, by default the bundled set); then every
other candidate goes through the same filters with the held-out problems added to the
benchmark: a train problem is neither the same code nor the same structure (the same ops with
other constants) as a held-out one, nor more similar to any held-out or benchmark problem than
the threshold (AST similarity, 0.9 as in synthesis). So held-out problems measure what
training did not show.

``problem_set_folder(spec)`` (or ``curriculum_folder(folder, spec)``, which also takes the
spec's fields as a config gives them, or a folder as is) is the set for a spec in
``$CUDA_AGENT_CACHE/curriculum/<families>-<digest>``, built on first use (seconds: nothing is
evaluated but the row families' screen, PyTorch on one small input per draw) and renamed into
place atomically.

What it does not do: run the problems (the reference answers and kernels are checked by tests
that compile them all; the evaluator runs each problem when it scores an answer), or apply the
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
from cuda_agent.rl.curriculum.families import FAMILIES, Candidate, draw
from cuda_agent.rl.curriculum.families import problem_id as make_id
from cuda_agent.rl.curriculum.ops import Composition
from cuda_agent.rl.curriculum.sources import (  # noqa: F401 (SIZES, PROBLEM_TEMPLATE: public)
    PROBLEM_TEMPLATE,
    SIZES,
    catalogue_key,
    problem_source,
)
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.filters import DEFAULT_THRESHOLD, StaticFilters

VERSION = 1  # raise when the problems written for a spec change
SPLITS = ("train", "heldout")
MAX_CANDIDATES = 5000  # per family


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
    families: tuple[str, ...] = ("elementwise",)  # see ``families``; an equal share each

    def check(self) -> CurriculumSpec:
        if self.size not in SIZES:
            raise CurriculumError(f"curriculum size {self.size!r}: choose from {', '.join(SIZES)}")
        if self.n_train < 1 or self.n_heldout < 1:
            raise CurriculumError("a curriculum needs at least one train and one held-out problem")
        if not 0.0 < self.heldout_share < 1.0:
            raise CurriculumError("curriculum heldout_share must be between 0 and 1")
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown or not self.families or len(set(self.families)) != len(self.families):
            raise CurriculumError(
                f"curriculum families {list(self.families)}: distinct names among "
                f"{', '.join(FAMILIES)}"
            )
        if min(self.n_train, self.n_heldout) < len(self.families):
            raise CurriculumError("a curriculum needs a problem of every family in each split")
        return self

    def digest(self) -> str:
        key = json.dumps([VERSION, asdict(self), catalogue_key()], sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:12]


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
    total = MAX_CANDIDATES * len(spec.families)
    quotas = {
        "train": _quotas(spec.n_train, spec.families),
        "heldout": _quotas(spec.n_heldout, spec.families),
    }
    drawn: dict[int, Candidate] = {}

    def offer(split: str, filters: StaticFilters, heldout: bool) -> None:
        for index in range(total):
            if not any(quotas[split].values()):
                return
            family = spec.families[index % len(spec.families)]
            if not quotas[split][family]:
                continue
            if in_heldout_share(spec.seed, index, spec.heldout_share) != heldout:
                continue
            if index not in drawn:
                drawn[index] = draw(family, spec.seed + index)
            if _offer(index, family, drawn[index], split, filters, spec, rows, rejected):
                quotas[split][family] -= 1

    offer("heldout", StaticFilters(Decontaminator(benchmark), spec.threshold), True)
    train_filters = StaticFilters(
        Decontaminator({**benchmark, **{r["id"]: r["code"] for r in rows["heldout"]}}),
        spec.threshold,
    )
    for row in rows["heldout"]:  # the same code or structure as a held-out problem: refused
        train_filters.remember(row["id"], row["code"])
    offer("train", train_filters, False)
    for split in SPLITS:
        short = {family: left for family, left in quotas[split].items() if left}
        if short:
            wanted = spec.n_train if split == "train" else spec.n_heldout
            raise CurriculumError(
                f"curriculum: only {len(rows[split])} {split} problems pass the filters "
                f"among {total} candidates ({wanted} asked for; missing: "
                + ", ".join(f"{left} {family}" for family, left in short.items())
                + ")"
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
    name = "-".join(spec.families)
    folder = cache_root() / "curriculum" / f"{name}-{spec.digest()}"
    return build_once(folder, lambda path: build_problem_set(path, spec))


def curriculum_folder(folder: str | Path | None, spec: dict[str, Any] | None) -> Path:
    """A training configuration's problem set: ``folder`` when given, else the set of ``spec``
    (``CurriculumSpec``'s keys, ``families`` as a list; None: the default set) in the cache."""
    if folder:
        return Path(folder)
    fields = dict(spec or {})
    if "families" in fields:
        fields["families"] = tuple(fields["families"])
    try:
        chosen = CurriculumSpec(**fields)
    except TypeError as err:
        raise CurriculumError(f"curriculum settings {sorted(fields)}: {err}") from None
    return problem_set_folder(chosen)


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


def _quotas(count: int, families: tuple[str, ...]) -> dict[str, int]:
    """``count`` problems shared out over ``families`` (the first ones take the remainder)."""
    share, extra = divmod(count, len(families))
    return {family: share + (i < extra) for i, family in enumerate(families)}


def _offer(
    index: int,
    family: str,
    candidate: Candidate,
    split: str,
    filters: StaticFilters,
    spec: CurriculumSpec,
    rows: dict[str, list[dict[str, Any]]],
    rejected: list[dict[str, Any]],
) -> bool:
    """Whether candidate ``index`` passed the filters (and joined ``split``)."""
    problem_id = make_id(family, spec.seed + index)
    code = problem_source(problem_id, candidate, spec.size)
    verdict = filters.check(problem_id, code)
    if not verdict.passed:
        rejected.append(
            {
                "id": problem_id,
                "split": split,
                "filter": verdict.filter,
                "reason": verdict.reason,
                "torch_expr": candidate.torch_expr,
            }
        )
        return False
    source = "curriculum" if family == "elementwise" else f"curriculum-{family}"
    rows[split].append(
        {
            "id": problem_id,
            "code": code,
            "data_source": f"{source}#{len(candidate.ops)}",
            "split": split,
            "family": family,
            "ops": candidate.ops,
            "torch_expr": candidate.torch_expr,
            "answer": candidate.c_expr if isinstance(candidate, Composition) else None,
            "seed": spec.seed + index,
            "similarity": verdict.similarity,
            "closest": verdict.closest,
        }
    )
    return True


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
        families: dict[str, int] = {}
        for row in rows[split]:
            ops_count[str(len(row["ops"]))] = ops_count.get(str(len(row["ops"])), 0) + 1
            families[row["family"]] = families.get(row["family"], 0) + 1
        out["splits"][split] = {
            "problems": len(rows[split]),
            "families": families,
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
