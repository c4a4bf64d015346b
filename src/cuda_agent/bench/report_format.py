"""Plain-text formatting for the HTML report: numbers, cut texts, verdicts, one-line summaries.

Every function here returns plain text (or plain values): percentages, speed-ups, times in µs,
a text cut to its head and tail, a compact JSON rendering, an evaluation's verdict and status,
a one-line evaluation summary. Nothing here builds HTML or escapes anything (the templates do),
reads files or computes metrics (``metrics.compute_metrics`` does).
"""

from __future__ import annotations

import json
import math
from typing import Any

from cuda_agent.core.types import EvalResult


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if abs(value) < 10000 else f"{value:,.0f}"


def fmt_metric(value: Any, kind: str) -> str:
    """A metric as ``pct`` (``60.0%``) or as a speed-up (``1.06x``); ``-`` when not a number."""
    number = as_number(value)
    return fmt_pct(number) if kind == "pct" else fmt_x(number)


def as_number(value: Any) -> float | None:
    """``value`` as a finite float, or None (booleans, strings, NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def truncate(text: str, limit: int) -> tuple[str, int]:
    """``text`` cut to ``limit`` characters (head and tail kept); also how many were cut."""
    if len(text) <= limit:
        return text, 0
    head = limit * 2 // 3
    tail = limit - head
    return text[:head] + "\n[…]\n" + text[-tail:], len(text) - limit


def compact(value: Any, limit: int = 300) -> str:
    """``value`` as one line of JSON (``repr`` if it is not JSON), cut to ``limit`` characters."""
    try:
        text = json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def level_name(level: str) -> str:
    return "No level" if level == "none" else f"Level {level}"


def verdict(result: EvalResult) -> tuple[str, str]:
    """(verdict text, status) of an evaluation result; the status is ``ok`` or ``fail``."""
    if result.correct:
        return "correct", "ok"
    if result.error is not None and result.error.stage:
        return f"failed at {result.error.stage}", "fail"
    return ("incorrect" if result.compiled else "failed"), "fail"


def eval_summary(result: EvalResult) -> str:
    """One line on an evaluation: verdict, reward, speed-ups, runtime (plain text)."""
    bits = [verdict(result)[0]]
    reward = as_number(result.reward)
    if reward is not None:
        bits.append(f"reward {reward:.2f}")
    for value, name in ((result.speedup_eager, "vs eager"), (result.speedup_compile, "vs compile")):
        if (number := as_number(value)) is not None:
            bits.append(f"{fmt_x(number)} {name}")
    runtime = as_number(result.runtime_us)
    if runtime is not None:
        bits.append(f"{fmt_us(runtime)} µs")
    if result.flags:
        bits.append("flags: " + ", ".join(str(f) for f in result.flags))
    return ", ".join(bits)
