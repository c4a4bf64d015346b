"""Does a small model learn to write kernels? Base, RFT and RFT+GRPO on the same held-out problems.

Usage: python benchmarks/kernel_learning.py PHASE [--model qwen-coder-0.5b] [--task kernel]
       [--backend cuda] [--state DIR] [--out DIR] [--deadline EPOCH] [options]

Phases (each fits one 10-minute device call; what the next needs stays in ``--state``):

* ``rft``: ``train rft``'s path (``rl.trl.curriculum_rft.run_rft``): the base model sampled over
  the training split (``--train-samples`` at ``--temperature``, each distinct answer evaluated
  once, verdicts kept in the state, so a retry of a cut phase re-evaluates nothing), the
  learnable problems (base pass rate strictly between 0 and 1), the model's own passing,
  deduplicated replies as supervised examples, one round of fine-tuning -> ``STATE/rft/model``
  (the replies are kept in the state before they are scored, so a retry generates nothing)
  (the sample is scored untimed: every check of the policy, no speed-up, since a pass is all
  fine-tuning needs; a ``samples.jsonl`` already in the state is used instead of sampling;
  with no sample but the ``rft.jsonl`` and ``learnable.json`` an earlier run chose, the
  fine-tuning alone runs again on those examples: a lease lost after the choice loses the
  model only);
* ``heldout ARM``: the held-out split scored for one arm, ``--samples`` replies per problem:
  ``base`` (the base model at ``--temperature``), ``null`` (the same sampling with another seed,
  no training: the noise floor), ``greedy`` (the base at temperature 0, one reply), ``rft``,
  ``rft2``, ``mixed``, ``cold``, ``grpo``, ``teacher`` (the ``--teacher`` model itself, sampled as
  ``base``), ``teacher-rft`` -> ``STATE/heldout/ARM.json`` (``--heldout-folder``: another folder
  for arms sampled with other settings, reported against that folder's own ``base``);
* ``learnable``: the RFT model sampled over the training split as ``rft`` sampled the base
  (untimed, the same verdict cache) -> ``STATE/rft/learnable-rft.json``: the problems the
  fine-tuned model passes strictly between 0 and 1 times, which ``grpo`` then trains on (the
  base's learnable problems are the ones RFT trained on: the RFT model passes nearly all their
  replies, and all-pass groups carry no advantage; 2026-12-04, 61 of 64 rollouts passed);
* ``rft2``: expert iteration's second round, after ``learnable``: the base model fine-tuned
  again, on the passing, deduplicated replies of both samples (the RFT model's over the train
  split first, then the base's; at most ``--per-problem`` a problem) -> ``STATE/rft2/model``
  (fine-tuning the base, not the RFT model, on the union: a second fine-tuning of the
  fine-tuned model on its own replies overfits); the RFT model passes problems the base never
  did, so the examples reach further than round one's;
* ``teacher``: a stronger model (``--teacher``, the 1.5B) sampled over the training split as
  ``learnable`` samples the RFT model (untimed, the same verdict cache) ->
  ``STATE/teacher-sample/samples.jsonl``: passing replies the 0.5B cannot make (2026-12-05: no
  0.5B reply passed a row-wise problem in 640), with the teacher's pass rate per family;
* ``mixed``: the base model fine-tuned as in ``rft2``, on the passing, deduplicated replies of
  the base's, the RFT model's and the teacher's samples (the 0.5B's own first, so the teacher's
  fill only what its own leave under ``--per-problem``) -> ``STATE/mixed/model``;
* ``reference``: the curriculum's own short kernel for each train problem of
  ``--cold-families`` (``rl.curriculum.reply_kernels``: the prompt's style, a warp per row for
  row problems, 160-450 tokens, within the replies' budget), written as a reply in the
  prompt's form and scored like one -> ``STATE/reference-sample/samples.jsonl``: the examples
  no model here makes (2026-12-06: no reply of the 0.5B or the 1.5B passed a row-wise problem,
  0 of 1,920), and correct device code for the ops the models call as if CUDA had them
  (``softplus(v)``: half of RFT's held-out build failures);
* ``cold``: the base fine-tuned as in ``mixed``, on its own two samples' passes and the
  passing references (the model's own first) -> ``STATE/cold/model``;
* ``teacher-rft``: the teacher fine-tuned on its own sample's passing, deduplicated replies (the
  ``rft`` round for the ``--teacher`` model) -> ``STATE/teacher-rft/model``;
* ``grpo``: GRPO from the RFT model on its learnable training problems, set against collapse
  (``rl.trl.settings.StableGRPO``: ``--rollouts`` a step, loss ``grpo``, KL ``--beta``, constant
  ``--lr``, truncated replies masked; ``rl.trl.guards``: stop when no-answer replies double or
  replies shrink by 40%), ``--reward harness|graded``, until ``--deadline`` ->
  ``STATE/grpo/model``;
* ``report``: every arm scored so far against ``base`` (``rl.curriculum.report``: pass rates
  with intervals from resampling problems, the paired difference and its sign test, outcome
  mix, pass@8, rewarded replies with an integrity flag; the teacher's own arms also against
  ``teacher``) and per op and family ->
  ``OUT/learning.json``, ``OUT/learning.md``; the table is printed last.

Every evaluation is the harness's under the task's policy (``strict`` for ``kernel``, the
memory check on). A progress line comes at least every generation batch and scoring pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ARMS = ("base", "null", "greedy", "rft", "rft2", "mixed", "cold", "grpo", "teacher", "teacher-rft")
TRAINED = ("rft", "rft2", "mixed", "cold", "grpo", "teacher-rft")  # their model: STATE/ARM/model
# the folder of STATE where each sampling phase keeps its samples.jsonl
SAMPLE_OF = {
    "rft": "rft",
    "learnable": "rft-sample",
    "teacher": "teacher-sample",
    "reference": "reference-sample",
}
# a phase that fine-tunes on the union of samples: the phases that made them, in order
UNIONS = {
    "rft2": ("learnable", "rft"),
    "mixed": ("learnable", "rft", "teacher"),
    "cold": ("learnable", "rft", "reference"),
    "teacher-rft": ("teacher",),
}
LEARNABLE_AFTER_RFT = "learnable-rft.json"  # the learnable phase's; grpo prefers it


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    phases = ("rft", "learnable", "teacher", "teacher-rft", "reference", "rft2", "mixed", "cold")
    phases += ("heldout", "grpo", "report")
    parser.add_argument("phase", choices=phases)
    parser.add_argument("arm", nargs="?", choices=ARMS, help="the arm of a heldout phase")
    parser.add_argument("--model", default="qwen-coder-0.5b")
    parser.add_argument("--teacher", default="qwen-coder-1.5b", help="the stronger sampler")
    parser.add_argument("--task", default="kernel")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--state", default="/tmp/learn-state")
    parser.add_argument("--out", default="gpu-results/learning")
    parser.add_argument("--families", default="elementwise,chain,rowwise,reduction")
    parser.add_argument(
        "--cold-families",
        default="elementwise,chain,rowwise,reduction",
        help="the reference phase's families",
    )
    parser.add_argument("--n-train", type=int, default=160)
    parser.add_argument("--n-heldout", type=int, default=48)
    parser.add_argument("--train-limit", type=int, help="the first N training problems only")
    parser.add_argument("--heldout-limit", type=int, help="the first N held-out problems only")
    parser.add_argument("--train-samples", type=int, default=8)
    parser.add_argument("--samples", type=int, default=8, help="held-out replies per problem")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--max-new-tokens", type=int, default=384)
    parser.add_argument(
        "--heldout-folder",
        default="heldout",
        help="the folder of --state for the held-out arms and the report: another one for arms "
        "sampled with other settings (heldout-512 for --max-new-tokens 512), never mixed",
    )
    parser.add_argument("--batch-prompts", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=12, help="evaluations at once")
    parser.add_argument("--per-problem", type=int, default=4, help="RFT answers per problem")
    parser.add_argument("--sft-lr", type=float, default=1e-5)
    parser.add_argument("--sft-epochs", type=float, default=2.0)
    parser.add_argument("--sft-batch", type=int, default=16)
    parser.add_argument("--sft-max-steps", type=int, default=-1)
    parser.add_argument("--steps", type=int, default=40, help="GRPO optimizer steps at most")
    parser.add_argument("--rollouts", type=int, default=64, help="GRPO replies per step")
    parser.add_argument("--generations", type=int, default=8, help="GRPO replies per group")
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-6, help="GRPO learning rate")
    parser.add_argument("--beta", type=float, default=0.04)
    parser.add_argument("--loss", default="grpo", help="GRPO loss_type")
    parser.add_argument("--reward", default="graded", choices=("harness", "graded"))
    parser.add_argument("--deadline", type=float, help="epoch seconds by which to stop")
    return parser.parse_args(argv)


def folder_of(args: argparse.Namespace) -> Path:
    from cuda_agent.rl.curriculum.problem_set import curriculum_folder

    spec = {
        "size": "small",
        "families": args.families.split(","),
        "n_train": args.n_train,
        "n_heldout": args.n_heldout,
    }
    return curriculum_folder(None, spec)


def options_of(args: argparse.Namespace, timed: bool = True) -> Any:
    """The evaluation options: the task's policy comes from the task; timed against eager
    (the reward's 2 for a kernel faster than eager), or untimed where only a pass matters."""
    from cuda_agent.evaluator.options import EvalOptions

    return EvalOptions(backend=args.backend, baselines=("eager",) if timed else ())


def sft_settings(args: argparse.Namespace) -> Any:
    """The fine-tuning settings of every phase that fine-tunes (``--sft-*``)."""
    from cuda_agent.rl.trl.sft import SFTSettings

    return SFTSettings(
        learning_rate=args.sft_lr,
        epochs=args.sft_epochs,
        batch=args.sft_batch,
        max_steps=args.sft_max_steps,
    )


def phase_rft(args: argparse.Namespace, state: Path, model: str) -> None:
    from cuda_agent.rl.curriculum.generation import SamplingSettings
    from cuda_agent.rl.trl.curriculum_rft import run_rft

    out = state / "rft"
    samples_file = out / "samples.jsonl"
    kept_examples = out / "rft.jsonl"
    chosen = kept_examples.is_file() and (out / "learnable.json").is_file()
    if chosen and not samples_file.is_file():
        fine_tune_kept(args, out, model, kept_examples)
        return
    summary = run_rft(
        model,
        args.task,
        args.backend,
        out,
        folder=folder_of(args),
        sampling=SamplingSettings(
            args.train_samples, args.temperature, args.max_new_tokens, 0, args.batch_prompts
        ),
        sft=sft_settings(args),
        per_problem=args.per_problem,
        limit=args.train_limit,
        jobs=args.jobs,
        samples_file=samples_file if samples_file.is_file() else None,
        eval_options=options_of(args, timed=False),  # fine-tuning needs passes, not speed
        log=log,
    )
    keys = ("replies", "base_pass_rate", "problems", "learnable", "examples", "outcomes")
    print(json.dumps({k: summary[k] for k in keys} | {"seconds": summary["seconds"]}))


def fine_tune_kept(args: argparse.Namespace, out: Path, model: str, examples: Path) -> None:
    """The fine-tuning alone, on the examples an earlier ``rft`` chose (a lease that ended
    after choosing them lost the model, not the choice): no sampling, no scoring."""
    from cuda_agent.rl.trl.sft import run_sft

    rows = [json.loads(line) for line in examples.read_text(encoding="utf-8").splitlines()]
    log(f"fine-tuning on the {len(rows)} kept examples of {examples} (sample not redone)")
    trained = run_sft(model, rows, out, sft_settings(args), None)
    log(f"fine-tuned {trained['steps']} steps; model in {trained['model']}")


def phase_union(args: argparse.Namespace, state: Path, model: str, name: str) -> None:
    """A phase of ``UNIONS`` (module docstring): ``run_rft`` of ``model`` on the union of the
    samples the phase names, in that order (``rft_examples`` keeps the first ``--per-problem``
    a problem)."""
    from cuda_agent.rl.curriculum.sampling import read_samples, write_samples
    from cuda_agent.rl.trl.curriculum_rft import run_rft

    sources = [(state / SAMPLE_OF[phase] / "samples.jsonl", phase) for phase in UNIONS[name]]
    for path, phase in sources:
        if not path.is_file():
            raise SystemExit(f"{name}: no sample at {path} (run the {phase} phase first)")
    out = state / name
    union = out / "samples.jsonl"
    if not union.is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_samples(union, [sample for path, _ in sources for sample in read_samples(path)])
    summary = run_rft(
        model,
        args.task,
        args.backend,
        out,
        folder=folder_of(args),
        sft=sft_settings(args),
        per_problem=args.per_problem,
        samples_file=union,
        log=log,
    )
    family_of = {sample.problem: sample.family for sample in read_samples(union)}
    by_family: dict[str, int] = {}
    for row in (out / "rft.jsonl").read_text(encoding="utf-8").splitlines():
        family = family_of.get(json.loads(row)["problem"], "?")
        by_family[family] = by_family.get(family, 0) + 1
    print(json.dumps({"examples": summary["examples"], "by_family": by_family}))


def sample_train(args: argparse.Namespace, state: Path, policy: str, out: Path) -> Any:
    """``policy`` sampled over the training split, untimed (as ``rft``'s sample: the same
    verdict cache), into ``out/samples.jsonl``; returns its ``learnable_record``."""
    from cuda_agent.rl.curriculum.generation import SamplingSettings
    from cuda_agent.rl.curriculum.sampling import sample_split, write_samples
    from cuda_agent.rl.curriculum.verdicts import VerdictCache
    from cuda_agent.rl.trl.curriculum_rft import learnable_record

    settings = SamplingSettings(
        args.train_samples, args.temperature, args.max_new_tokens, 0, args.batch_prompts
    )
    log(f"sampling {policy} over the train split, {settings}")
    samples = sample_split(
        policy,
        args.task,
        args.backend,
        folder_of(args),
        "train",
        settings,
        limit=args.train_limit,
        jobs=args.jobs,
        options=options_of(args, timed=False),
        cache=VerdictCache(state / "rft" / "verdicts.jsonl"),
        log=log,
        replies_file=out / "replies.jsonl",
    )
    write_samples(out / "samples.jsonl", samples)
    families: dict[str, list[int]] = {}
    for sample in samples:
        counts = families.setdefault(sample.family, [0, 0])
        counts[0] += sample.passed
        counts[1] += 1
    log("passes per family: " + ", ".join(f"{f} {p}/{n}" for f, (p, n) in families.items()))
    return learnable_record(samples)


def phase_learnable(args: argparse.Namespace, state: Path) -> None:
    model = state / "rft" / "model"
    if not model.is_dir():
        raise SystemExit(f"learnable: no RFT model at {model} (run the rft phase first)")
    record = sample_train(args, state, str(model), state / SAMPLE_OF["learnable"])
    target = state / "rft" / LEARNABLE_AFTER_RFT
    target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    log(
        f"RFT model on the train split: pass {record['pass_rate']:.3f}, "
        f"{len(record['pairs'])} learnable problems of {len(record['pass_counts'])} -> {target}"
    )


def phase_teacher(args: argparse.Namespace, state: Path) -> None:
    from cuda_agent.rl.models.path import resolve_model_path

    out = state / SAMPLE_OF["teacher"]
    record = sample_train(args, state, resolve_model_path(args.teacher), out)
    (out / "learnable.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    log(
        f"teacher {args.teacher} on the train split: pass {record['pass_rate']:.3f}, "
        f"{len(record['pairs'])} learnable problems of {len(record['pass_counts'])}"
    )


def phase_reference(args: argparse.Namespace, state: Path) -> None:
    """The references of the train split's ``--cold-families`` problems, scored (untimed, the
    train samples' verdict cache)."""
    from cuda_agent.rl.curriculum.sampling import reference_samples, write_samples
    from cuda_agent.rl.curriculum.verdicts import VerdictCache

    families = tuple(args.cold_families.split(","))
    samples = reference_samples(
        args.backend,
        folder_of(args),
        "train",
        families,
        limit=args.train_limit,
        jobs=args.jobs,
        options=options_of(args, timed=False),
        cache=VerdictCache(state / "rft" / "verdicts.jsonl"),
        log=log,
    )
    write_samples(state / SAMPLE_OF["reference"] / "samples.jsonl", samples)
    passed = sum(sample.passed for sample in samples)
    log(f"references of {','.join(families)}: {passed} of {len(samples)} passed")


def phase_heldout(args: argparse.Namespace, state: Path, model: str) -> None:
    from cuda_agent.rl.curriculum.generation import SamplingSettings
    from cuda_agent.rl.curriculum.sampling import sample_split
    from cuda_agent.rl.curriculum.verdicts import VerdictCache
    from cuda_agent.rl.models.path import resolve_model_path

    arm = args.arm or "base"
    paths = {name: state / name / "model" for name in TRAINED}
    policy = str(paths[arm]) if arm in paths else model
    if arm == "teacher":
        policy = resolve_model_path(args.teacher)
    if arm in paths and not paths[arm].is_dir():
        raise SystemExit(f"heldout {arm}: no model at {paths[arm]} (run the {arm} phase first)")
    greedy = arm == "greedy"
    settings = SamplingSettings(
        samples=1 if greedy else args.samples,
        temperature=0.0 if greedy else args.temperature,
        max_new_tokens=args.max_new_tokens,
        seed=1 if arm == "null" else 0,
        batch_prompts=args.batch_prompts,
    )
    log(f"held-out, arm {arm}: {policy}, {settings}")
    began = time.monotonic()
    samples = sample_split(
        policy,
        args.task,
        args.backend,
        folder_of(args),
        "heldout",
        settings,
        limit=args.heldout_limit,
        jobs=args.jobs,
        options=options_of(args),
        # one verdict cache for every held-out folder: its key holds the answer and the options
        cache=VerdictCache(state / "heldout" / "verdicts.jsonl"),
        log=log,
        replies_file=state / args.heldout_folder / f"{arm}.replies.jsonl",
    )
    record = {
        "arm": arm,
        "model": policy,
        "settings": vars(settings),
        "seconds": round(time.monotonic() - began, 1),
        "replies": [s.as_dict() for s in samples],
    }
    target = state / args.heldout_folder / f"{arm}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(record), encoding="utf-8")
    passed = sum(s.passed for s in samples)
    log(f"held-out {arm}: {passed}/{len(samples)} passed in {record['seconds']} s -> {target}")


def phase_grpo(args: argparse.Namespace, state: Path) -> None:
    from cuda_agent.rl.trl.single_turn import run_curriculum

    start = state / "rft" / "model"
    if not start.is_dir():
        raise SystemExit(f"grpo: no RFT model at {start} (run the rft phase first)")
    stable = {
        "num_generations": args.generations,
        "rollouts": args.rollouts,
        "micro_batch": args.micro_batch,
        "learning_rate": args.lr,
        "beta": args.beta,
        "loss_type": args.loss,
    }
    deadline = args.deadline - 45 if args.deadline else None  # saving the policy
    base = json.loads((state / "rft" / "learnable.json").read_text(encoding="utf-8"))
    learnable = state / "rft" / LEARNABLE_AFTER_RFT
    if not learnable.is_file():
        learnable = state / "rft" / "learnable.json"
    log(f"grpo on the learnable problems of {learnable}")
    # no-answer replies against the base's share in its sample; length against the first step
    guard = {"format_share": base["format_share"]}
    summary = run_curriculum(
        str(start),
        args.task,
        args.steps,
        args.backend,
        state / "grpo",
        folder=folder_of(args),
        max_completion_length=args.max_new_tokens,
        temperature=args.temperature,
        save_model=True,
        jobs=args.jobs,
        stop_at=deadline,
        learnable=learnable,
        stable=stable,
        guard=guard,
        reward_scheme=args.reward,
        eval_options=options_of(args),
    )
    for step in summary["per_step"]:
        print(
            json.dumps(
                {k: step.get(k) for k in ("step", "mean_reward", "pass_rate", "outcomes")}
                | {"tokens": step.get("completion_tokens"), "s": step["seconds"]["step"]}
            )
        )
    log(f"grpo: {summary['steps']} steps; stopped by guard: {summary['stopped_by_guard']}")


def phase_report(args: argparse.Namespace, state: Path) -> None:
    from cuda_agent.rl.curriculum.report import (
        arm_from_replies,
        markdown_table,
        per_op_table,
        to_dict,
    )

    arms = []
    for name in ARMS:
        path = state / args.heldout_folder / f"{name}.json"
        if path.is_file():
            replies = json.loads(path.read_text(encoding="utf-8"))["replies"]
            arms.append(arm_from_replies(name, replies))
    if not arms or arms[0].name != "base":
        raise SystemExit("report: no base arm scored yet (heldout base first)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {}
    for name in TRAINED:
        summary = state / name / ("steps.jsonl" if name == "grpo" else "summary.json")
        if summary.is_file():
            extra[name] = summary.read_text(encoding="utf-8")
    data = to_dict(arms, "base", ks=(1, args.samples))
    table = markdown_table(arms, "base", k=args.samples)
    teacher_arms = [arm for arm in arms if arm.name.startswith("teacher")]
    if len(teacher_arms) > 1 and teacher_arms[0].name == "teacher":  # its RFT against itself
        data["against_teacher"] = to_dict(teacher_arms, "teacher", ks=(1, args.samples))
        table += "\n\n" + markdown_table(teacher_arms, "teacher", k=args.samples)
    (out / "learning.json").write_text(json.dumps(data | {"runs": extra}, indent=1), "utf-8")
    families = per_op_table(arms, by="family")
    ops = per_op_table(arms)
    (out / "learning.md").write_text(f"{table}\n\n{families}\n\n{ops}\n", encoding="utf-8")
    print(f"\n{ops}\n\n{families}\n\n{table}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from cuda_agent.rl.models.path import resolve_model_path

    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    if args.phase == "report":
        phase_report(args, state)
        return 0
    model = resolve_model_path(args.model)
    log(f"model {model}; problems {folder_of(args)}")
    if args.phase == "rft":
        phase_rft(args, state, model)
    elif args.phase == "learnable":
        phase_learnable(args, state)
    elif args.phase == "teacher":
        phase_teacher(args, state)
    elif args.phase == "reference":
        phase_reference(args, state)
    elif args.phase in UNIONS:
        start = resolve_model_path(args.teacher) if args.phase == "teacher-rft" else model
        phase_union(args, state, start, args.phase)
    elif args.phase == "heldout":
        phase_heldout(args, state, model)
    else:
        phase_grpo(args, state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
