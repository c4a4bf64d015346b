"""A model sampled over a curriculum split: every reply with its verdict, and what they say.

``sample_split(model_path, task, backend, folder, split, settings, ...)`` loads the model,
builds the prompt of every (task, problem) pair of the split (``task`` may join rungs with
``+``; a rung is offered only the problems its family supports), generates
``settings.samples`` replies per prompt in batches (``generation``) and scores them, each
distinct answer once (``verdicts``; ``cache`` keeps verdicts across calls and runs). It
returns one ``Sample`` per reply: the problem spec, its family and ops, the task, the reply,
its length and whether it was cut off, and the verdict. With ``replies_file`` the replies are
kept before they are scored (``kept_replies``), so a run cut while scoring generates nothing
again. ``reference_samples`` scores, in the same form, a known-good kernel of the curriculum's
own (``reply_kernels.reply_kernel``: short enough to be a reply within the model's token
budget) as the one reply to each ``kernel`` prompt of the families asked: a cold-start set for
a family that no model passes.

On the records:

* ``pass_counts(samples)``: per problem, (passed, replies);
* ``learnable(samples)``: the problems whose pass rate is strictly between 0 and 1, the only
  ones a group of replies can learn from (a group all right or all wrong has no advantage);
* ``write_samples`` / ``read_samples``: ``samples.jsonl``, one line per reply.

What it does not do: train, or compute intervals (``report``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum import task_names
from cuda_agent.rl.curriculum.families import family_of, supports
from cuda_agent.rl.curriculum.generation import (
    Reply,
    SamplingSettings,
    generate_replies,
    load_policy,
)
from cuda_agent.rl.curriculum.kept_replies import keep, kept, replies_key
from cuda_agent.rl.curriculum.problem_set import read_split, row_spec
from cuda_agent.rl.curriculum.reply_kernels import reply_kernel
from cuda_agent.rl.curriculum.scoring import pooled_evaluator
from cuda_agent.rl.curriculum.tasks import check_task, kernel_reply, messages
from cuda_agent.rl.curriculum.verdicts import VerdictCache, score_replies

SAMPLES_FILE = "samples.jsonl"


@dataclass(frozen=True)
class Sample:
    problem: str  # the problem spec (FOLDER/SPLIT.jsonl#ID)
    task: str
    family: str
    ops: tuple[str, ...]
    reply: str
    tokens: int
    truncated: bool
    answer: str | None
    reward: float
    outcome: str  # format, build, wrong, pass
    error_stage: str | None
    flags: tuple[str, ...]
    cached: bool

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Prompted:
    """One (task, problem) pair of a split and its chat prompt."""

    task: str
    spec: str
    family: str
    ops: tuple[str, ...]
    prompt: list[dict[str, str]]


def split_prompts(
    task: str,
    folder: Path,
    split: str,
    backend: str,
    limit: int | None = None,
    pairs: set[tuple[str, str]] | None = None,
) -> list[Prompted]:
    """The prompts of every rung of ``task`` over the split's problems (the first ``limit``
    rows; only the (rung, problem spec) ``pairs`` when given) that the rung supports."""
    out: list[Prompted] = []
    rows = read_split(folder, split)[:limit]
    for name in task_names(task):
        check_task(name)
        for row in rows:
            spec = row_spec(folder, row)
            family = family_of(str(row["id"]))
            if (pairs is not None and (name, spec) not in pairs) or not supports(name, family):
                continue
            prompt = messages(name, resolve_problem(spec), backend)
            out.append(Prompted(name, spec, family, tuple(row.get("ops") or ()), prompt))
    return out


def sample_split(
    model_path: str,
    task: str,
    backend: str,
    folder: Path,
    split: str,
    settings: SamplingSettings,
    *,
    limit: int | None = None,
    pairs: set[tuple[str, str]] | None = None,
    jobs: int = 1,
    options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    cache: VerdictCache | None = None,
    device: str | None = None,
    log: Callable[[str], None] | None = None,
    replies_file: Path | None = None,
) -> list[Sample]:
    """Every reply to the split's prompts, with its verdict (see the module docstring).
    ``replies_file``: the replies are kept there before they are scored, and read from there
    instead of generated when it holds this model's replies to these prompts with these
    settings (``kept_replies``)."""
    prompted = split_prompts(task, folder, split, backend, limit, pairs)
    began = time.monotonic()
    prompts = [p.prompt for p in prompted]
    key = replies_key(model_path, settings, prompts) if replies_file is not None else ""
    replies = kept(replies_file, key) if replies_file is not None else None
    if replies is None:
        model, tokenizer, where = load_policy(model_path, device)
        replies = generate_replies(model, tokenizer, prompts, settings, where, log)
        del model
        if replies_file is not None:
            keep(replies_file, key, replies)
    elif log is not None:
        log(f"replies to {len(prompts)} prompts read from {replies_file} (generated before)")
    generated_s = time.monotonic() - began
    flat = [(pair, reply) for pair, group in zip(prompted, replies, strict=True) for reply in group]
    return score_samples(
        flat, backend, options, evaluator, jobs, cache, log, f"generated in {generated_s:.0f} s"
    )


def reference_samples(
    backend: str,
    folder: Path,
    split: str,
    families: tuple[str, ...],
    *,
    limit: int | None = None,
    jobs: int = 1,
    options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
    cache: VerdictCache | None = None,
    log: Callable[[str], None] | None = None,
) -> list[Sample]:
    """The short known-good kernel (``reply_kernel``) of each ``kernel`` problem of
    ``families`` in the split, as a reply in the prompt's own form (one fenced block), scored
    like a model's (module docstring). A reference that does not pass is kept with its
    verdict, never trained on."""
    prompted = [
        p for p in split_prompts("kernel", folder, split, backend, limit) if p.family in families
    ]
    flat = []
    for pair in prompted:
        code = reply_kernel(resolve_problem(pair.spec), backend)
        flat.append((pair, Reply(kernel_reply(code, backend), tokens=0, truncated=False)))
    return score_samples(flat, backend, options, evaluator, jobs, cache, log, "written")


def score_samples(
    flat: list[tuple[Prompted, Reply]],
    backend: str,
    options: EvalOptions | None,
    evaluator: Evaluator,
    jobs: int,
    cache: VerdictCache | None,
    log: Callable[[str], None] | None,
    made: str,
) -> list[Sample]:
    """Each (prompt, reply) scored, each distinct answer once, as ``Sample`` records; ``made``
    says in the progress line how the replies came (generated, written)."""
    chosen = options or EvalOptions(backend=backend, baselines=("eager",))
    began = time.monotonic()
    with pooled_evaluator(backend, jobs, evaluator) as scorer:
        verdicts = score_replies(
            [pair.task for pair, _ in flat],
            [pair.spec for pair, _ in flat],
            [reply.text for _, reply in flat],
            backend,
            chosen,
            scorer,
            jobs,
            cache,
            log,
        )
    if log is not None:
        evaluated = sum(not v.cached and v.outcome != "format" for v in verdicts)
        prompts = len({(pair.task, pair.spec) for pair, _ in flat})
        log(
            f"{len(flat)} replies to {prompts} prompts: {made}, "
            f"{evaluated} distinct answers evaluated in {time.monotonic() - began:.0f} s"
        )
    return [
        Sample(
            problem=pair.spec,
            task=pair.task,
            family=pair.family,
            ops=pair.ops,
            reply=reply.text,
            tokens=reply.tokens,
            truncated=reply.truncated,
            answer=verdict.answer,
            reward=verdict.reward,
            outcome=verdict.outcome,
            error_stage=verdict.error_stage,
            flags=verdict.flags,
            cached=verdict.cached,
        )
        for (pair, reply), verdict in zip(flat, verdicts, strict=True)
    ]


def pass_counts(samples: list[Sample]) -> dict[tuple[str, str], tuple[int, int]]:
    """Per (task, problem): (replies that passed, replies)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for sample in samples:
        entry = counts.setdefault((sample.task, sample.problem), [0, 0])
        entry[0] += sample.passed
        entry[1] += 1
    return {key: (passed, total) for key, (passed, total) in counts.items()}


def learnable(samples: list[Sample]) -> list[tuple[str, str]]:
    """The (task, problem) pairs whose pass rate is strictly between 0 and 1, in order."""
    return [key for key, (passed, total) in pass_counts(samples).items() if 0 < passed < total]


def write_samples(path: Path, samples: list[Sample]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(s.as_dict(), sort_keys=True) + "\n" for s in samples)
    path.write_text(text, encoding="utf-8")


def read_samples(path: Path) -> list[Sample]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            row["ops"], row["flags"] = tuple(row["ops"]), tuple(row["flags"])
            out.append(Sample(**row))
    return out
