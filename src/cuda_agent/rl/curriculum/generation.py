"""Replies of a causal LM to many chat prompts at once: batched, left-padded, seeded.

``generate_replies(model, tokenizer, prompts, settings, device)`` renders each prompt with the
tokenizer's chat template, pads a batch of ``settings.batch_prompts`` prompts on the left and
asks ``model.generate`` for ``settings.samples`` replies per prompt (sampled at
``settings.temperature``; greedy at 0, where one reply per prompt is all there is). It returns,
per prompt, a list of ``Reply``: the decoded text, how many tokens the model wrote (up to and
including its end-of-sequence token) and whether the reply was cut off at
``settings.max_new_tokens``. One progress line per batch goes to ``log``.

Sampling is seeded per batch from ``settings.seed``, so the same settings, model and prompts
give the same replies on the same machine. Batches change the padding, and with it the
numerics, slightly: a reply can differ from the one a prompt generated alone would get.

What it does not do: load the model (``load_policy``), score replies, or train.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SamplingSettings:
    samples: int = 8
    temperature: float = 0.8
    max_new_tokens: int = 384
    seed: int = 0
    batch_prompts: int = 16  # prompts per generate call (each with `samples` replies)

    def check(self) -> SamplingSettings:
        if self.samples < 1 or self.max_new_tokens < 1 or self.batch_prompts < 1:
            raise ValueError("sampling: samples, max_new_tokens and batch_prompts must be >= 1")
        if self.temperature <= 0 and self.samples > 1:
            raise ValueError("sampling: greedy decoding (temperature 0) gives one reply a prompt")
        return self


@dataclass(frozen=True)
class Reply:
    text: str
    tokens: int  # tokens the model wrote, its end-of-sequence token included
    truncated: bool  # cut off at max_new_tokens (no end-of-sequence token)


def load_policy(model_path: str, device: str | None = None) -> tuple[Any, Any, str]:
    """The model (float32, eval mode, on ``device``: CUDA when there is a GPU) and its
    tokenizer, and the device's name."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    model: Any = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32)
    return model.to(where).eval(), tokenizer, where


def generate_replies(
    model: Any,
    tokenizer: Any,
    prompts: list[list[dict[str, str]]],
    settings: SamplingSettings,
    device: str,
    log: Callable[[str], None] | None = None,
) -> list[list[Reply]]:
    """``settings.samples`` replies to each prompt, in the prompts' order."""
    import torch

    settings.check()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    pad_id = (
        tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    )
    stop_ids = _stop_ids(model, tokenizer)
    out: list[list[Reply]] = []
    try:
        for start in range(0, len(prompts), settings.batch_prompts):
            began = time.monotonic()
            batch = prompts[start : start + settings.batch_prompts]
            texts = [
                tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
                for p in batch
            ]
            encoded = tokenizer(
                texts, return_tensors="pt", padding=True, add_special_tokens=False
            ).to(device)
            sampling: dict[str, Any] = (
                {
                    "do_sample": True,
                    "temperature": settings.temperature,
                    "num_return_sequences": settings.samples,
                }
                if settings.temperature > 0
                else {"do_sample": False}
            )
            torch.manual_seed(settings.seed * 1_000_003 + start)
            with torch.no_grad():
                output = model.generate(
                    **encoded,
                    max_new_tokens=settings.max_new_tokens,
                    pad_token_id=pad_id,
                    **sampling,
                )
            width = encoded["input_ids"].shape[1]
            per_prompt = settings.samples if settings.temperature > 0 else 1
            for index in range(len(batch)):
                rows = output[index * per_prompt : (index + 1) * per_prompt, width:]
                out.append([_reply(tokenizer, row.tolist(), stop_ids) for row in rows])
            if log is not None:
                done = min(start + len(batch), len(prompts))
                log(
                    f"generated {done}/{len(prompts)} prompts x {per_prompt} "
                    f"({time.monotonic() - began:.1f} s for this batch)"
                )
    finally:
        tokenizer.padding_side = padding_side
    return out


def _stop_ids(model: Any, tokenizer: Any) -> set[int]:
    config = getattr(model, "generation_config", None)
    ids = getattr(config, "eos_token_id", None)
    found = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        found.add(int(tokenizer.eos_token_id))
    return found


def _reply(tokenizer: Any, ids: list[int], stop_ids: set[int]) -> Reply:
    """The reply in ``ids`` (generated tokens, padded on the right after a stop; a row with no
    stop token ran to ``max_new_tokens``: generation ends early only when every row stopped)."""
    for position, token in enumerate(ids):
        if token in stop_ids:
            text = tokenizer.decode(ids[:position], skip_special_tokens=True)
            return Reply(str(text), position + 1, False)
    return Reply(str(tokenizer.decode(ids, skip_special_tokens=True)), len(ids), True)
