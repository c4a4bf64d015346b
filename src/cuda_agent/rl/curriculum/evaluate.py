"""A model's pass rate on one split of the curriculum: the point of a learning curve.

``evaluate_split(model_path, task, backend, folder, split)`` loads a causal LM by path,
generates ``samples`` replies per problem of the split with the task's prompt (the
tokenizer's chat template; greedy by default, or sampled at ``temperature``), scores every
reply with ``tasks.score_reply`` (the harness's evaluator, the task's policy; ``jobs`` at once
through ``scoring``) and returns ``{"task", "split", "problems", "samples", "temperature",
"mean_reward", "pass_rate", "replies"}`` (``replies``: the problem, the reply, the answer read
from it, the reward, the evaluation's error stage and flags).
Run it on the held-out split of the base model and of a trained one to see whether training
generalised.

What it does not do: batch generation across problems (one prompt at a time, so results do
not depend on padding), or train anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum.problem_set import read_split, row_spec
from cuda_agent.rl.curriculum.scoring import pooled_evaluator, score_batch
from cuda_agent.rl.curriculum.tasks import check_task, messages, outcome


def evaluate_split(
    model_path: str,
    task: str,
    backend: str,
    folder: Path,
    split: str = "heldout",
    *,
    limit: int | None = None,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    samples: int = 1,
    seed: int = 0,
    jobs: int = 1,
    device: str | None = None,
    eval_options: EvalOptions | None = None,
    evaluator: Evaluator = evaluate,
) -> dict[str, Any]:
    """``samples`` replies per problem (sampled at ``temperature``; greedy at 0, where more
    than one sample would repeat the same reply); ``device``: where the model generates
    (default: CUDA when there is a GPU); ``jobs``: evaluations at once (``scoring``)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_task(task)
    if samples < 1 or (temperature <= 0 and samples > 1):
        raise ValueError("evaluate_split: samples >= 1, and 1 when greedy (temperature 0)")
    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model: Any = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    model = model.to(where).eval()
    options = eval_options or EvalOptions(backend=backend, baselines=("eager",))
    generator = torch.Generator().manual_seed(seed)
    specs: list[str] = []
    texts: list[str] = []
    for row in read_split(folder, split)[:limit]:
        spec = row_spec(folder, row)
        prompt = messages(task, resolve_problem(spec), backend)
        encoded: Any = tokenizer.apply_chat_template(
            prompt, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = encoded.to(where)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": temperature, "num_return_sequences": samples}
            if temperature > 0
            else {"do_sample": False}
        )
        with torch.no_grad():
            if temperature > 0:
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
            output = model.generate(
                **ids,
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                **sampling,
            )
        prompt_length = ids["input_ids"].shape[1]
        for sequence in output:
            specs.append(spec)
            texts.append(str(tokenizer.decode(sequence[prompt_length:], skip_special_tokens=True)))
    del model
    with pooled_evaluator(backend, jobs, evaluator) as scorer:
        scores = score_batch(task, specs, texts, backend, options, scorer, jobs)
    replies: list[dict[str, Any]] = []
    for spec, text, score in zip(specs, texts, scores, strict=True):
        error = score.result.error if score.result is not None else None
        replies.append(
            {
                "problem": spec,
                "reply": text,
                "answer": score.answer,
                "reward": score.reward,
                "error_stage": error.stage if error is not None else None,
                "outcome": outcome(score),
                "flags": list(score.result.flags) if score.result is not None else [],
            }
        )
    rewards = [r["reward"] for r in replies]
    return {
        "task": task,
        "split": split,
        "problems": len(set(specs)),
        "samples": samples,
        "temperature": temperature,
        "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        "pass_rate": sum(r >= 1.0 for r in rewards) / len(rewards) if rewards else None,
        "replies": replies,
    }
