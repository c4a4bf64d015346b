"""``train rft --task RUNG``: sample the model over the training split, keep what it got right,
fine-tune it on that (one round of expert iteration).

``run_rft(model_path, task, backend, out, ...)``, in order, each part written to ``out`` as it
is made (a crash loses only the part in progress):

1. the sample (``rl.curriculum.sampling.sample_split``): ``sampling.samples`` replies per
   (task, problem) of the ``split`` at ``sampling.temperature``, each distinct answer
   evaluated once (the replies kept in ``replies.jsonl`` before they are scored, and each
   verdict in ``verdicts.jsonl`` as it is made, so a second run on the same model and split,
   after one cut while scoring, neither generates nor re-evaluates what the first did) ->
   ``samples.jsonl``; or, with ``samples_file``, an earlier sample read back;
2. the learnable set -> ``learnable.json``: per (task, problem) the base pass rate, the pairs
   strictly between 0 and 1 (what GRPO should train on next), and the sample's share of
   no-answer replies and mean reply length (the references of ``rl.trl.guards``);
3. the supervised examples (``rl.trl.sft.rft_examples``) -> ``rft.jsonl``;
4. the fine-tuning (``rl.trl.sft.run_sft``) -> ``model/``;
5. ``summary.json``: the counts of every part and the fine-tuning's losses.

What it does not do: score the held-out split (``benchmarks/kernel_learning.py`` does, before
and after), or run more than one round (fine-tuning the base once is the recipe's advice:
later rounds overfit on code).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.rl.curriculum.generation import SamplingSettings
from cuda_agent.rl.curriculum.sampling import (
    SAMPLES_FILE,
    Sample,
    learnable,
    pass_counts,
    read_samples,
    sample_split,
    write_samples,
)
from cuda_agent.rl.curriculum.verdicts import VerdictCache
from cuda_agent.rl.trl.sft import EXAMPLES_FILE, SFTSettings, rft_examples, run_sft, write_examples

LEARNABLE_FILE = "learnable.json"
REPLIES_FILE = "replies.jsonl"
SUMMARY_FILE = "summary.json"


class NothingToLearn(CudaAgentError):
    """No reply of the sample passed cleanly: there is nothing to fine-tune on."""


def learnable_record(samples: list[Sample]) -> dict[str, Any]:
    """What ``learnable.json`` holds for ``samples`` (module docstring, part 2)."""
    counts = pass_counts(samples)
    replies = len(samples) or 1
    return {
        "pairs": [list(pair) for pair in learnable(samples)],
        "pass_counts": [[task, spec, p, n] for (task, spec), (p, n) in counts.items()],
        "format_share": sum(s.outcome == "format" for s in samples) / replies,
        "mean_tokens": sum(s.tokens for s in samples) / replies,
        "pass_rate": sum(s.passed for s in samples) / replies,
    }


def read_learnable(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    data["pairs"] = [tuple(pair) for pair in data["pairs"]]
    return data


def run_rft(
    model_path: str,
    task: str,
    backend: str,
    out: Path,
    *,
    folder: Path,
    split: str = "train",
    sampling: SamplingSettings | None = None,
    sft: SFTSettings | None = None,
    per_problem: int = 4,
    limit: int | None = None,
    jobs: int = 1,
    samples_file: Path | None = None,
    eval_options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    use_cpu: bool | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One round of rejection-sampling fine-tuning (module docstring); returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    if samples_file is not None:
        samples = read_samples(samples_file)
        log(f"sample: {len(samples)} replies read from {samples_file}")
    else:
        log(f"sampling {model_path} over the {split} split of {folder}")
        samples = sample_split(
            model_path,
            task,
            backend,
            folder,
            split,
            (sampling or SamplingSettings()).check(),
            limit=limit,
            jobs=jobs,
            options=eval_options,
            evaluator=evaluator,
            cache=VerdictCache(out / "verdicts.jsonl"),
            log=log,
            replies_file=out / REPLIES_FILE,
        )
    write_samples(out / SAMPLES_FILE, samples)
    sampled_s = time.monotonic() - began
    record = learnable_record(samples)
    (out / LEARNABLE_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    examples = rft_examples(samples, backend, per_problem)
    write_examples(out / EXAMPLES_FILE, examples)
    log(
        f"sample: {len(samples)} replies, pass {record['pass_rate']:.3f}, "
        f"{len(record['pairs'])} learnable problems of {len(record['pass_counts'])}, "
        f"{len(examples)} examples for fine-tuning"
    )
    if not examples:
        raise NothingToLearn(
            f"rft: none of the {len(samples)} replies passed without a flag, so there is "
            f"nothing to fine-tune on (outcomes {_outcomes(samples)}; the replies are in "
            f"{out / SAMPLES_FILE}): sample more, or start from a stronger model"
        )
    mark = time.monotonic()
    trained = run_sft(model_path, examples, out, sft, use_cpu)
    log(
        f"fine-tuned {trained['steps']} steps in {time.monotonic() - mark:.0f} s "
        f"(loss {trained['losses'][0] if trained['losses'] else float('nan'):.3f} -> "
        f"{trained['losses'][-1] if trained['losses'] else float('nan'):.3f}); "
        f"model in {trained['model']}"
    )
    summary = {
        "model": model_path,
        "task": task,
        "backend": backend,
        "folder": str(folder),
        "split": split,
        "replies": len(samples),
        "base_pass_rate": record["pass_rate"],
        "problems": len(record["pass_counts"]),
        "learnable": len(record["pairs"]),
        "examples": len(examples),
        "outcomes": _outcomes(samples),
        "seconds": {"sample": round(sampled_s, 1), "sft": round(time.monotonic() - mark, 1)},
        "sft": trained,
    }
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def run_rft_options(
    model_path: str,
    task: str,
    backend: str,
    out: str,
    *,
    folder: str | None = None,
    spec: dict[str, Any] | None = None,
    sampling: dict[str, Any] | None = None,
    sft: dict[str, Any] | None = None,
    baselines: list[str] | None = None,
    samples_file: str | None = None,
    **rest: Any,
) -> dict[str, Any]:
    """``run_rft`` from the plain options of a plan (``rl.recipe``: ``train rft --task``)."""
    from cuda_agent.rl.curriculum.problem_set import curriculum_folder

    options = EvalOptions(backend=backend, baselines=tuple(baselines or ("eager",)))
    return run_rft(
        model_path,
        task,
        backend,
        Path(out),
        folder=curriculum_folder(folder, spec),
        sampling=SamplingSettings(**(sampling or {})),
        sft=SFTSettings(**(sft or {})),
        samples_file=Path(samples_file) if samples_file else None,
        eval_options=options,
        **rest,
    )


def _outcomes(samples: list[Sample]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for sample in samples:
        counts[sample.outcome] = counts.get(sample.outcome, 0) + 1
    return dict(sorted(counts.items()))
