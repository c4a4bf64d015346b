"""Stop a GRPO run that is collapsing: replies that stop answering, or shrink.

``CollapseGuard(step_log, limits)`` reads each step ``StepLog`` closed (``rl.trl.step_log``:
its ``outcomes`` and ``completion_tokens``) and stops training, after the step, when

* the share of replies with no answer (``format``: empty, unparsable) exceeds
  ``format_factor`` times the reference share and ``format_floor`` (twice nothing is still
  nothing, and a few empty replies among a hundred are noise), or
* the mean reply length falls below ``(1 - length_drop)`` times the reference length,

over the mean of the last ``window`` steps. The reference is ``limits.format_share`` /
``limits.mean_tokens`` when given (the starting checkpoint's own figures, from its sample of
the training split), else the first step's. ``reason`` says which guard tripped, at which
step, with the figures; None while training runs on. ``guard_callback(guard)`` is the
``transformers.TrainerCallback`` that asks it after every logged step and stops the trainer
(transformers is imported there, not by this module).

What it does not do: roll back to an earlier checkpoint, or look at held-out replies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GuardLimits:
    format_factor: float = 2.0
    format_floor: float = 0.1
    length_drop: float = 0.4
    window: int = 2
    format_share: float | None = None  # the reference share of no-answer replies
    mean_tokens: float | None = None  # the reference mean reply length


class CollapseGuard:
    def __init__(self, step_log: Any, limits: GuardLimits | None = None) -> None:
        self.step_log = step_log
        self.limits = limits or GuardLimits()
        self.reason: str | None = None
        self._seen = 0

    def after_log(self) -> bool:
        """Whether to stop, given the steps logged so far (sets ``reason``)."""
        steps = self.step_log.steps
        if len(steps) != self._seen and self.reason is None:
            self._seen = len(steps)
            self.reason = self.check(steps)
        return self.reason is not None

    def check(self, steps: list[dict[str, Any]]) -> str | None:
        """Why training should stop after ``steps`` (the steps so far), or None."""
        limits = self.limits
        figures = [f for f in (_figures(step) for step in steps) if f is not None]
        if not figures:
            return None
        reference_format = limits.format_share if limits.format_share is not None else figures[0][0]
        reference_tokens = limits.mean_tokens if limits.mean_tokens is not None else figures[0][1]
        recent = figures[-limits.window :]
        if len(recent) < limits.window:
            return None
        format_share = sum(f[0] for f in recent) / len(recent)
        mean_tokens = sum(f[1] for f in recent) / len(recent)
        step = int(steps[-1].get("step", len(steps)))
        ceiling = max(limits.format_factor * reference_format, limits.format_floor)
        if format_share > ceiling:
            return (
                f"step {step}: replies with no answer {format_share:.2f} of the last "
                f"{limits.window} steps, above {ceiling:.2f} ({limits.format_factor:g} x the "
                f"reference {reference_format:.2f})"
            )
        if reference_tokens > 0 and mean_tokens < (1 - limits.length_drop) * reference_tokens:
            return (
                f"step {step}: mean reply length {mean_tokens:.0f} tokens over the last "
                f"{limits.window} steps, down more than {limits.length_drop:.0%} from "
                f"{reference_tokens:.0f}"
            )
        return None


def _figures(step: dict[str, Any]) -> tuple[float, float] | None:
    """(share of no-answer replies, mean tokens per reply) of one logged step."""
    replies = len(step.get("rewards") or [])
    tokens = step.get("completion_tokens")
    if not replies or tokens is None:
        return None
    outcomes = step.get("outcomes") or {}
    return (outcomes.get("format", 0) / replies, float(tokens) / replies)


def guard_callback(guard: CollapseGuard) -> Any:
    """The ``TrainerCallback`` that stops training once ``guard`` trips (after the step)."""
    from transformers import TrainerCallback

    class GuardCallback(TrainerCallback):  # type: ignore[misc,unused-ignore]
        def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            if guard.after_log():
                control.should_training_stop = True
            return control

    return GuardCallback()
