"""Token bookkeeping of one multi-turn episode: the prompt, then model and context tokens.

An RL trainer needs the episode as one token sequence: the prompt, then a response made of
the model's own tokens (loss mask 1, with the sampler's log-probs) and the tokens the
environment inserted between turns (mask 0, log-prob 0.0): tool results, a nudge after a
cut-off reply, and the chat template's turn boundaries. ``TokenTrace`` keeps the three lists
aligned; ``ChatTokens`` renders the prompt and the context tokens with the tokenizer's own
chat template, so the sequence is what the template renders for the conversation.

How context tokens are made (text level, any chat template that is append-only):

* the template's text for the appended messages (tool results, or a user message) plus the
  next generation prompt is found as the difference between rendering a small synthetic
  conversation with and without them (``<|im_start|>user\\n<tool_response>...`` and
  ``<|im_start|>assistant\\n`` for a ChatML template);
* the model's turn ends with whatever the model generated (often its end-of-turn token); the
  part of the template's closing text after an assistant turn that the model did not generate
  (the newline after ``<|im_end|>``, or the whole closing of a cut-off reply) is inserted
  first, as context.

The model's turns are never re-rendered: the trace keeps the tokens it generated (reasoning
included, even where a template would drop past reasoning), and the next request sees that same
trace. The synthetic assistant turn carries some reasoning, so templates that show reasoning
only on the last turn or on turns that have some (Qwen3) render it alike with and without
what follows.

What it does not do: multimodal content, templates whose rendering of appended messages
depends on the real earlier turns, token-level prefix checks against a full re-render (the
text is encoded piece by piece; boundaries fall on special tokens or newlines).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_MARK = "\u27e6cuda-agent-turn\u27e7"  # a string no template produces by itself
_SYNTHETIC: list[dict[str, Any]] = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "u"},
]
# Reasoning on the synthetic assistant turn: templates that show reasoning only on the last
# turn unless a turn has some (Qwen3) render that turn the same with or without what follows.
_REASONING = "r"


@dataclass
class TokenTrace:
    """The prompt and the response built so far; mask and log-probs aligned with the response.

    ``logprobs`` becomes None (for good) as soon as a model turn comes without log-probs.
    """

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)

    def add_model(self, token_ids: list[int], logprobs: list[float] | None) -> None:
        if logprobs is not None and len(logprobs) != len(token_ids):
            raise ValueError(f"{len(logprobs)} log-probs for {len(token_ids)} generated tokens")
        self.response_ids.extend(token_ids)
        self.mask.extend([1] * len(token_ids))
        if logprobs is None:
            self.logprobs = None
        elif self.logprobs is not None:
            self.logprobs.extend(float(x) for x in logprobs)

    def add_context(self, token_ids: list[int]) -> None:
        self.response_ids.extend(token_ids)
        self.mask.extend([0] * len(token_ids))
        if self.logprobs is not None:
            self.logprobs.extend([0.0] * len(token_ids))

    @property
    def context_ids(self) -> list[int]:
        """Everything the model sees before its next turn: prompt then response."""
        return self.prompt_ids + self.response_ids


class ChatTokens:
    """Renders the prompt and the context tokens of an episode with ``tokenizer``'s template."""

    def __init__(self, tokenizer: Any, tools: list[dict[str, Any]] | None = None) -> None:
        self.tokenizer = tokenizer
        self.tools = tools or None
        self._closing: str | None = None

    def prompt_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        """The first prompt: ``messages`` with the tool schemas and the generation prompt."""
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=self.tools,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def context_ids(self, generated: list[int], appended: list[dict[str, Any]]) -> list[int]:
        """Tokens that follow the model's turn ``generated`` when ``appended`` messages (tool
        results, or one user message) come next, up to and including the next generation
        prompt."""
        text = self.missing_closing(generated) + self.appended_text(appended)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def missing_closing(self, generated: list[int]) -> str:
        """The end of the template's assistant-turn closing that ``generated`` lacks."""
        closing = self.assistant_closing()
        text = self.tokenizer.decode(generated, skip_special_tokens=False)
        for k in range(len(closing), 0, -1):
            if text.endswith(closing[:k]):
                return closing[k:]
        return closing

    def assistant_closing(self) -> str:
        """What the template writes after an assistant turn's content (``<|im_end|>\\n``)."""
        if self._closing is None:
            turn = {"role": "assistant", "content": _MARK, "reasoning_content": _REASONING}
            text = self._render([*_SYNTHETIC, turn])
            if _MARK not in text:
                raise ValueError("the chat template does not render assistant content")
            self._closing = text[text.rindex(_MARK) + len(_MARK) :]
        return self._closing

    def appended_text(self, appended: list[dict[str, Any]]) -> str:
        """The template's text for ``appended`` after an assistant turn, with the generation
        prompt."""
        if not appended:
            raise ValueError("nothing to append")
        if appended[0].get("role") == "tool":
            calls = [
                {"type": "function", "function": {"name": "tool", "arguments": {}}}
                for m in appended
                if m.get("role") == "tool"
            ]
            turn: dict[str, Any] = {
                "role": "assistant",
                "content": "",
                "reasoning_content": _REASONING,
                "tool_calls": calls,
            }
            base = [*_SYNTHETIC, turn]
        else:  # a user turn renders the same whatever came before it
            base = list(_SYNTHETIC)
        before = self._render(base)
        after = self._render([*base, *appended], add_generation_prompt=True)
        if not after.startswith(before):
            roles = ", ".join(str(m.get("role")) for m in appended)
            raise ValueError(f"the chat template is not append-only (appending {roles})")
        return after[len(before) :]

    def _render(self, messages: list[dict[str, Any]], add_generation_prompt: bool = False) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return str(text)
