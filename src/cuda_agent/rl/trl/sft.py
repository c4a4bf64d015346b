"""Rejection-sampling fine-tuning (expert iteration) on the curriculum, with TRL's SFT trainer.

``rft_examples(samples, backend, per_problem)`` turns a sample of the model's own replies
(``rl.curriculum.sampling``) into supervised examples: only replies that passed the
evaluator (reward >= 1), raised no integrity flag and were not cut off; deduplicated by their
answer (whitespace aside) and at most ``per_problem`` distinct answers per (task, problem), so
that easy problems do not fill the set. Each example is conversational prompt-completion data:
``prompt`` is the task's chat prompt for the problem (``tasks.messages``), ``completion`` the
reply as an assistant turn; TRL then puts only the completion in the loss.

``run_sft(model_path, examples, out, settings)`` fine-tunes the model on them with TRL's
``SFTTrainer`` (full fine-tuning in float32; ``SFTSettings``: learning rate, epochs, batch,
cosine schedule with warm-up, ``max_steps`` for a smoke run) and saves the model and its
tokenizer into ``out/model``. It returns the steps taken, the loss per logged step, whether the
weights moved and where the model went.

What it does not do: sample the model (``rl.trl.curriculum_rft`` does it first), or judge
agent trajectories (``rl.rft`` does that for the agentic recipe).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.problems.sets import resolve_problem
from cuda_agent.rl.curriculum.sampling import Sample
from cuda_agent.rl.curriculum.tasks import messages
from cuda_agent.rl.trl.weights import moved, snapshot

EXAMPLES_FILE = "rft.jsonl"


@dataclass(frozen=True)
class SFTSettings:
    learning_rate: float = 1e-5
    epochs: float = 2.0
    batch: int = 16
    lr_scheduler_type: str = "cosine"
    warmup: float = 0.03  # a share of the steps (below 1) or a number of steps
    max_length: int = 2048  # tokens of prompt and reply together
    max_steps: int = -1  # > 0: stop there (a smoke run)
    seed: int = 0


def rft_examples(samples: list[Sample], backend: str, per_problem: int = 4) -> list[dict[str, Any]]:
    """The supervised examples of ``samples`` (module docstring), in the samples' order."""
    kept: dict[tuple[str, str], list[str]] = {}
    examples: list[dict[str, Any]] = []
    prompts: dict[tuple[str, str], list[dict[str, str]]] = {}
    for sample in samples:
        if not sample.passed or sample.flags or sample.truncated or sample.answer is None:
            continue
        key = (sample.task, sample.problem)
        answers = kept.setdefault(key, [])
        normal = re.sub(r"\s+", " ", sample.answer).strip()
        if normal in answers or len(answers) >= per_problem:
            continue
        answers.append(normal)
        if key not in prompts:
            prompts[key] = messages(sample.task, resolve_problem(sample.problem), backend)
        examples.append(
            {
                "prompt": prompts[key],
                "completion": [{"role": "assistant", "content": sample.reply}],
                "task": sample.task,
                "problem": sample.problem,
            }
        )
    return examples


def write_examples(path: Path, examples: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(example, sort_keys=True) + "\n" for example in examples)
    path.write_text(text, encoding="utf-8")


def run_sft(
    model_path: str,
    examples: list[dict[str, Any]],
    out: Path,
    settings: SFTSettings | None = None,
    use_cpu: bool | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model_path`` on ``examples`` and save it into ``out/model``."""
    import torch
    from datasets import Dataset  # type: ignore[import-untyped,unused-ignore]
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer  # type: ignore[import-untyped,unused-ignore]

    chosen = settings or SFTSettings()
    if not examples:
        raise ValueError("run_sft: no examples (no passing, unflagged reply to learn from)")
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    # the trainer aligns the model's end-of-sequence ids with the tokenizer's; generation
    # keeps stopping where the model's own configuration said (Qwen: <|im_end|> too)
    generation_config = copy.deepcopy(model.generation_config)
    config = SFTConfig(
        output_dir=str(out / "trainer"),
        learning_rate=chosen.learning_rate,
        num_train_epochs=chosen.epochs,
        max_steps=chosen.max_steps,
        per_device_train_batch_size=chosen.batch,
        lr_scheduler_type=chosen.lr_scheduler_type,
        warmup_steps=chosen.warmup,
        max_length=chosen.max_length,
        completion_only_loss=True,
        seed=chosen.seed,
        use_cpu=(not torch.cuda.is_available()) if use_cpu is None else use_cpu,
        bf16=False,
        fp16=False,
        report_to="none",
        logging_steps=1,
        save_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    columns = [{"prompt": e["prompt"], "completion": e["completion"]} for e in examples]
    before = snapshot(model)
    with torch.enable_grad():
        trainer = SFTTrainer(
            model=model,
            args=config,
            train_dataset=Dataset.from_list(columns),
            processing_class=tokenizer,
        )
        output = trainer.train()
    target = out / "model"
    model.generation_config = generation_config
    trainer.save_model(str(target))
    tokenizer.save_pretrained(target)
    changed = moved(before, model)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return {
        "examples": len(examples),
        "steps": int(trainer.state.global_step),
        "loss": float(output.training_loss),
        "losses": losses,
        "changed_params": changed,
        "model": str(target),
    }
