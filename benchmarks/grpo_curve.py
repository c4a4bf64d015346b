"""The learning curve: GRPO on curriculum rungs, held-out pass rate before and after.

Usage: python benchmarks/grpo_curve.py [--model smollm2] [--backend cuda] [--task fill-in+kernel]
       [--phase before|train|after|all] [--state DIR] [--steps 40] [--generations 8]
       [--lr 2e-5] [--samples 4] [--temperature 0.7] [--jobs 6] [--deadline EPOCH] --out DIR

With ``--phase`` the three parts run in separate calls (a device call lasts 10 minutes at
most), keeping what the next needs in ``--state``; ``all`` runs them in one.

1. The held-out split of the curriculum, scored for the starting model for every task of
   ``--task``: ``--samples`` replies per problem at ``--temperature``
   (``rl.curriculum.evaluate.evaluate_split``), with the 95% Wilson interval of the pass
   rate and how many replies ended in each outcome (format, build, wrong, pass) or beat eager.
2. ``train grpo``'s curriculum path (``rl.trl.single_turn.run_curriculum``) for ``--steps``
   steps on the train split, the policy saved; with ``--deadline`` training stops early (after
   the step in progress) so that the final scoring still fits, and the summary says so.
3. The held-out split scored again for the trained policy, with the same sampling settings.
4. The trained policy's favourite correct answers (most frequent among the held-out replies)
   evaluated once more under the ``strict`` and ``kernelbench`` policies: what a reward under
   the red-team checks would make of what it learned.

Writes ``OUT/curve.json`` (settings, both held-out scores per task, per-step log, timings,
flags seen, and how many rewarded training rollouts carried an integrity flag: must be 0),
``OUT/curve.png`` (the plot), and the run's ``steps.jsonl`` and ``completions.jsonl``; prints a
progress line per phase and a short table last. Every evaluation runs under the full integrity
checks of the task's policy.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def summary_of(score: dict[str, Any]) -> dict[str, Any]:
    if "given" in score:  # measured in an earlier run (--before)
        return {k: score[k] for k in ("problems", "samples", "pass_rate", "mean_reward")} | {
            "replies": score["given"],
            "measured_earlier": True,
        }
    flags = collections.Counter(f for r in score["replies"] for f in r["flags"])
    stages = collections.Counter(str(r["error_stage"]) for r in score["replies"])
    return {
        "problems": score["problems"],
        "samples": score["samples"],
        "replies": len(score["replies"]),
        "mean_reward": score["mean_reward"],
        "pass_rate": score["pass_rate"],
        "error_stages": dict(stages),
        "flags": dict(flags),
    }


def favourite_answers(score: dict[str, Any], count: int = 3) -> list[dict[str, Any]]:
    correct = [r for r in score["replies"] if r["reward"] >= 1.0 and r["answer"]]
    ranked = collections.Counter((r["problem"], r["answer"]) for r in correct).most_common(count)
    return [{"task": score["task"], "problem": p, "answer": a, "times": n} for (p, a), n in ranked]


def red_team(favourites: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """The favourite answers, written as their task writes them, under the strict and
    kernelbench policies (a model-new answer is torch code, so strict must reject it)."""
    import tempfile

    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.rl.curriculum.tasks import write_answer
    from cuda_agent.solutions.loader import load_solution

    out = []
    for favourite in favourites:
        problem = resolve_problem(favourite["problem"], "standard")
        with tempfile.TemporaryDirectory(prefix="ca-curve-favourite-") as folder:
            path = write_answer(
                favourite["task"], problem, favourite["problem"], backend, Path(folder),
                favourite["answer"],
            )  # fmt: skip
            for policy in ("strict", "kernelbench"):
                options = EvalOptions(backend=backend, baselines=("eager",), policy=policy)
                result = evaluate(problem, load_solution(path), options.validate())
                out.append(
                    {
                        "task": favourite["task"],
                        "problem": favourite["problem"],
                        "policy": policy,
                        "correct": result.correct,
                        "reward": result.reward,
                        "flags": list(result.flags),
                        "error_stage": result.error.stage if result.error else None,
                    }
                )
    return out


def plot(curve: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = curve["per_step"]
    xs = [s["step"] for s in steps]
    means = [s["mean_reward"] for s in steps]
    passes = [s["pass_rate"] for s in steps]
    window = 5
    rolling = [
        sum(passes[max(0, i - window + 1) : i + 1]) / len(passes[max(0, i - window + 1) : i + 1])
        for i in range(len(passes))
    ]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=120)
    left.plot(xs, means, color="#4c78a8", marker=".", label="mean reward (train group)")
    left.set_xlabel("step")
    left.set_ylabel("mean reward")
    left.grid(alpha=0.3)
    left.legend(loc="lower right", fontsize=8)
    right.plot(xs, passes, color="#bbbbbb", marker=".", label="pass rate (train group)")
    right.plot(xs, rolling, color="#f58518", label=f"pass rate, mean of {window} steps")
    colours = ("#54a24b", "#b279a2", "#e45756")
    for (task, scores), colour in zip(curve["heldout"].items(), colours, strict=False):
        for key, style in (("before", ":"), ("after", "--")):
            rate = scores[key]["pass_rate"]
            right.axhline(
                rate, color=colour, linestyle=style, label=f"held-out {task} {key}: {rate:.2f}"
            )
    right.set_xlabel("step")
    right.set_ylabel("pass rate")
    right.set_ylim(-0.02, 1.02)
    right.grid(alpha=0.3)
    right.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"GRPO, {curve['settings']['model']}, curriculum {curve['settings']['task']} "
        f"({curve['settings']['backend']} evaluator)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def wilson(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a pass rate."""
    if total == 0:
        return (0.0, 0.0)
    p = passed / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * ((p * (1 - p) / total + z * z / (4 * total * total)) ** 0.5) / denominator
    return (round(max(0.0, centre - half), 3), round(min(1.0, centre + half), 3))


def score_summary(score: dict[str, Any]) -> dict[str, Any]:
    """``summary_of`` with the interval and the outcome shares (format, build, wrong, pass)."""
    summary = summary_of(score)
    replies = score.get("replies") or []
    if replies:
        passed = sum(r["reward"] >= 1.0 for r in replies)
        outcomes = collections.Counter(r.get("outcome") for r in replies)
        summary["pass_interval_95"] = wilson(passed, len(replies))
        summary["outcomes"] = {k: outcomes.get(k, 0) for k in ("format", "build", "wrong", "pass")}
        summary["beat_eager"] = sum(r["reward"] >= 2.0 for r in replies)
    return summary


def held_out(model: str, tasks: list[str], args: argparse.Namespace, folder: Path) -> dict:
    from cuda_agent.rl.curriculum.evaluate import evaluate_split

    sampling = {
        "samples": args.samples,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "jobs": args.jobs,
        "limit": args.limit,
    }
    scores = {}
    for task in tasks:
        mark = time.monotonic()
        scores[task] = evaluate_split(model, task, args.backend, folder, "heldout", **sampling)
        scores[task]["seconds"] = round(time.monotonic() - mark, 1)
        log(
            f"held-out {task} ({Path(model).name}): pass {scores[task]['pass_rate']:.3f}, "
            f"mean reward {scores[task]['mean_reward']:.3f} in {scores[task]['seconds']} s"
        )
    return scores


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2", help="tiny, smollm2, qwen-coder-0.5b, ...")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--task", default="model-new", help="a rung, or rungs joined by +")
    parser.add_argument(
        "--phase",
        choices=("before", "train", "after", "all"),
        default="all",
        help="one phase per call (state kept in --state between them), or all in one",
    )
    parser.add_argument("--state", default="/tmp/ca-curve-state")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--samples", type=int, default=4, help="held-out replies per problem")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--jobs", type=int, default=6, help="evaluations at once")
    parser.add_argument("--limit", type=int, help="held-out problems (default: all)")
    parser.add_argument("--deadline", type=float, help="epoch seconds by which to be done")
    parser.add_argument(
        "--final-reserve",
        type=float,
        default=60.0,
        help="with --phase all: seconds kept back beyond the held-out scoring after training "
        "(reckoned at 1.25 times the scoring before)",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    from cuda_agent.rl.curriculum.problem_set import CurriculumSpec, problem_set_folder, read_split
    from cuda_agent.rl.models.path import resolve_model_path
    from cuda_agent.rl.trl.single_turn import run_curriculum, task_list

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    tasks = task_list(args.task)
    model = resolve_model_path(args.model)
    folder = problem_set_folder(CurriculumSpec(size="small"))
    sizes = {s: len(read_split(folder, s)) for s in ("train", "heldout")}
    log(f"model {model}; curriculum {folder} ({sizes['train']} train, {sizes['heldout']} held out)")
    seconds: dict[str, float] = (
        json.loads((state / "seconds.json").read_text("utf-8"))
        if (state / "seconds.json").is_file()
        else {}
    )

    def save_seconds() -> None:
        (state / "seconds.json").write_text(json.dumps(seconds), "utf-8")

    if args.phase in ("before", "all"):
        mark = time.monotonic()
        before = held_out(model, tasks, args, folder)
        seconds["heldout_before"] = time.monotonic() - mark
        (state / "before.json").write_text(json.dumps(before), "utf-8")
        save_seconds()
        print_table({t: score_summary(s) for t, s in before.items()}, None)
    if args.phase in ("train", "all"):
        train_out = state / "train"
        shutil.rmtree(train_out, ignore_errors=True)
        deadline = args.deadline
        if deadline and args.phase == "all":
            deadline -= args.final_reserve + 1.25 * seconds.get("heldout_before", 0.0)
        elif deadline:
            deadline -= 30  # saving the policy
        mark = time.monotonic()
        trained = run_curriculum(
            model,
            args.task,
            args.steps,
            args.backend,
            train_out,
            folder=folder,
            num_generations=args.generations,
            max_completion_length=args.max_new_tokens,
            learning_rate=args.lr,
            temperature=args.temperature,
            save_model=True,
            jobs=args.jobs,
            stop_at=deadline,
        )
        seconds["training"] = time.monotonic() - mark
        save_seconds()
        log(f"trained {trained['steps']} steps in {seconds['training']:.0f} s")
        for name in ("steps.jsonl", "completions.jsonl"):
            shutil.copy(train_out / name, out / name)
    if args.phase in ("after", "all"):
        before = json.loads((state / "before.json").read_text("utf-8"))
        trained_model = str(state / "train" / "model")
        per_step = [
            json.loads(line)
            for line in (state / "train" / "steps.jsonl").read_text("utf-8").splitlines()
            if line
        ]
        mark = time.monotonic()
        after = held_out(trained_model, tasks, args, folder)
        seconds["heldout_after"] = time.monotonic() - mark
        favourites = [f for score in after.values() for f in favourite_answers(score)]
        checks = red_team(favourites, args.backend) if favourites else []
        finish(args, folder, sizes, before, after, per_step, favourites, checks, seconds, out)
    return 0


def finish(
    args: argparse.Namespace,
    folder: Path,
    sizes: dict[str, int],
    before: dict[str, Any],
    after: dict[str, Any],
    per_step: list[dict[str, Any]],
    favourites: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    seconds: dict[str, float],
    out: Path,
) -> None:
    train_flags: collections.Counter[str] = collections.Counter()
    outcomes: collections.Counter[str] = collections.Counter()
    for step in per_step:
        train_flags.update(step.get("flags") or {})
        outcomes.update(step.get("outcomes") or {})
    completions = out / "completions.jsonl"
    rewarded_flagged = 0
    if completions.is_file():
        for line in completions.read_text("utf-8").splitlines():
            row = json.loads(line)
            rewarded_flagged += bool(row["reward"] > 0 and row["flags"])
    tasks = list(before)
    curve = {
        "settings": vars(args),
        "curriculum": {"folder": str(folder), **sizes},
        "steps_run": len(per_step),
        "stopped_early": len(per_step) < args.steps,
        "heldout": {
            task: {"before": score_summary(before[task]), "after": score_summary(after[task])}
            for task in tasks
        },
        "train_flags": dict(train_flags),
        "train_outcomes": dict(outcomes),
        "train_rollouts": sum(len(s["rewards"]) for s in per_step),
        "rewarded_flagged_rollouts": rewarded_flagged,
        "per_step": per_step,
        "favourites": favourites,
        "favourites_under_red_team_policies": checks,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "replies_after": {task: after[task]["replies"] for task in tasks},
    }
    (out / "curve.json").write_text(json.dumps(curve, indent=1), "utf-8")
    if per_step:
        plot(curve, out / "curve.png")
    step_s = [s["seconds"]["step"] for s in per_step] or [0.0]
    print(
        f"\nsteps {len(per_step)}, {args.generations} per group, s/step "
        f"{sum(step_s) / len(step_s):.1f}; train outcomes {dict(outcomes)}"
    )
    print(
        f"train flags {dict(train_flags)}; rewarded rollouts with a flag: {rewarded_flagged}; "
        f"red-team policies on favourites: "
        f"{[(c['policy'], c['correct'], c['flags']) for c in checks]}"
    )
    print_table(
        {t: score_summary(before[t]) for t in tasks}, {t: score_summary(after[t]) for t in tasks}
    )


def print_table(before: dict[str, Any], after: dict[str, Any] | None) -> None:
    print("\ntask      when    pass   95% interval    mean reward  format build wrong pass beat")
    for task, summary in before.items():
        rows = [("before", summary)] + ([("after", after[task])] if after else [])
        for when, row in rows:
            low, high = row.get("pass_interval_95", (0, 0))
            o = row.get("outcomes", {})
            print(
                f"{task:<9} {when:<7} {row['pass_rate']:.3f}  [{low:.3f}, {high:.3f}]  "
                f"{row['mean_reward']:>8.3f}     {o.get('format', 0):>5} {o.get('build', 0):>5} "
                f"{o.get('wrong', 0):>5} {o.get('pass', 0):>4} {row.get('beat_eager', 0):>4}"
            )


if __name__ == "__main__":
    sys.exit(main())
