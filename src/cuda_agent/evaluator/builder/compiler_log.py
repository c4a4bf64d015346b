"""Trim compiler output to what an agent needs: the first errors, each with file:line.

Build logs from torch extensions are long (include chains through torch headers, template
back-traces). An agent needs the first few diagnostics in its own files. ``summarise`` keeps
those, drops the noise, and caps the size. It never invents text: every kept line is a line
of the original log.
"""

from __future__ import annotations

import re

DIAGNOSTIC = re.compile(
    r"^(?P<loc>[^\s:][^:]*?(?:\(\d+\)|:\d+(?::\d+)?)):?\s+"
    r"(?P<kind>(?:fatal )?error|catastrophic error)\b",
    re.I,
)
ANY_DIAGNOSTIC = re.compile(
    r"^[^\s:][^:]*?(?:\(\d+\)|:\d+(?::\d+)?):?\s+(?:fatal )?(error|warning|note)\b", re.I
)
LINKER_ERROR = re.compile(
    r"(undefined reference to|undefined symbol|multiple definition of|cannot find -l|ld returned)",
    re.I,
)
NOISE = re.compile(r"^(In file included from|\s+from |compilation terminated|\d+ errors? detected)")

MAX_ERRORS = 8
MAX_CONTEXT_LINES = 4
MAX_CHARS = 4000


def summarise(log: str) -> str:
    """The first errors of ``log`` with a few lines of context each; linker errors as-is."""
    lines = [ln.rstrip() for ln in log.splitlines()]
    blocks: list[list[str]] = []
    i = 0
    while i < len(lines) and len(blocks) < MAX_ERRORS:
        if DIAGNOSTIC.match(lines[i]):
            block = [lines[i]]
            j = i + 1
            while (
                j < len(lines)
                and len(block) <= MAX_CONTEXT_LINES
                and not ANY_DIAGNOSTIC.match(lines[j])
                and not NOISE.match(lines[j])
                and lines[j].strip()
            ):
                block.append(lines[j])
                j += 1
            blocks.append(block)
            i = j
        else:
            i += 1
    total_errors = sum(1 for ln in lines if DIAGNOSTIC.match(ln))
    if blocks:
        text = "\n".join("\n".join(b) for b in blocks)
        if total_errors > len(blocks):
            text += f"\n... ({total_errors - len(blocks)} more errors)"
    else:
        linker = [ln for ln in lines if LINKER_ERROR.search(ln)]
        kept = (
            linker[:12]
            if linker
            else [ln for ln in lines if ln.strip() and not NOISE.match(ln)][:20]
        )
        text = "\n".join(kept)
    return _cap(text)


def _cap(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    return text[: MAX_CHARS - 40].rstrip() + "\n... (log truncated)"
