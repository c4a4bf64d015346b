"""Shorten tool output for the model: compiler errors first, then the head and the tail."""

from __future__ import annotations

from cuda_agent.evaluator.builder.compiler_log import DIAGNOSTIC


def truncate_output(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters; else error lines, head and tail, marked."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    errors = [ln for ln in lines if DIAGNOSTIC.match(ln)]
    error_block = ""
    if errors:
        kept, size = [], 0
        for line in errors:
            if size + len(line) > limit // 3:
                break
            kept.append(line)
            size += len(line) + 1
        error_block = "[first errors]\n" + "\n".join(kept) + "\n"
    room = max(0, limit - len(error_block) - 80)
    head, tail = text[: room // 2], text[len(text) - room // 2 :] if room else ""
    omitted = len(text) - len(head) - len(tail)
    return f"{error_block}{head}\n[... {omitted} characters omitted ...]\n{tail}"
