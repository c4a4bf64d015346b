"""Making room after a context-length error: the oldest tool outputs are replaced by a note.

``trim_tool_outputs(messages, overflow, max_output_tokens)`` replaces the content of the
oldest ``tool`` messages, oldest first, with ``TRIMMED`` until enough is freed: when the
server's message gave its context window and the request's size (``ContextOverflow``), the
excess plus a margin, converted to this package's character estimate by the ratio of that
estimate to the server's prompt count; without those counts, half of the tool outputs. The
list is changed in place (the trajectory on disk keeps every output in full).

What it does not do: touch the system prompt, the task or the model's own turns, summarise,
or decide whether to retry (the loop retries once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cuda_agent.agent.chat_types import ContextOverflow, estimate_tokens

TRIMMED = "[tool output removed to fit the model's context window]"
MARGIN = 1.1  # free 10% more than the server's excess, plus a few tokens
EXTRA_TOKENS = 64


@dataclass
class Trim:
    outputs: int  # tool outputs replaced
    chars: int  # characters removed
    target_tokens: int | None  # what had to be freed (estimate units), None if unknown


def trim_tool_outputs(
    messages: list[dict[str, Any]], overflow: ContextOverflow, max_output_tokens: int
) -> Trim:
    outputs = [
        i for i, m in enumerate(messages) if m.get("role") == "tool" and m.get("content") != TRIMMED
    ]
    target = tokens_to_free(overflow, estimate_tokens(messages), max_output_tokens)
    freed = count = chars = 0
    for index in outputs:
        if target is not None and freed >= target:
            break
        if target is None and count >= max(1, len(outputs) // 2):
            break
        before = estimate_tokens([messages[index]])
        chars += len(str(messages[index].get("content") or ""))
        messages[index] = {**messages[index], "content": TRIMMED}
        freed += before - estimate_tokens([messages[index]])
        count += 1
    return Trim(count, chars, target)


def tokens_to_free(overflow: ContextOverflow, estimate: int, max_output_tokens: int) -> int | None:
    """The excess of the request over the server's window, in this package's estimate units."""
    if overflow.limit is None:
        return None
    requested = overflow.requested
    if requested is None and overflow.prompt is not None:
        requested = overflow.prompt + max_output_tokens
    if requested is None:
        return None
    scale = estimate / overflow.prompt if overflow.prompt else 1.0
    return math.ceil(max(requested - overflow.limit, 1) * scale * MARGIN) + EXTRA_TOKENS
