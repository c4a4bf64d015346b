"""The device budget: how long a candidate may keep its device once verification starts.

The budget is derived from the reference's own time. The worker times one warm reference call
(synchronised) right after the canary call, before any candidate code is imported, and sends it
to the parent (a ``reference`` event, ``worker/modes/evaluate.py``); the parent takes the first such
event only. When the worker reports the stage ``verify`` (the candidate is imported, built and
constructed: builds have their own ``build_timeout_s``), the parent shortens the worker's
deadline to now + budget (``launch/worker_process.run_worker``); past it, the whole process group is
killed and the verdict is ``device_budget_exceeded`` (``pipeline.py``). The candidate cannot
stop this: the clock runs in the parent, and the figure it uses was measured before the
candidate's code existed in the process.

The rule (``auto``)::

    budget = BASE_S + timing.max_seconds + RATIO * call_s * planned_calls
    planned_calls = 2 * trials + 2 * warmup_calls + 2 * MIN_TIMED_ROUNDS + EXTRA_CALLS

``planned_calls`` counts every model call the worker makes after ``verify`` starts, candidate
and reference alike, as if each took the candidate's time: the trials (both sides), timing's
warm-up (both sides) and the three rounds it runs at least, and ``EXTRA_CALLS`` for the rest
(canary, weight probe, decoy check, kernel record, stream check, profile). Timing otherwise
stops at ``max_seconds`` (the term added once). Without timing (no eager baseline) the timing
terms drop.

* ``RATIO`` = 10: a candidate up to about ten times slower per call than the reference fits
  (counting reference calls at the candidate's speed leaves more room still): an honest kernel
  a few times slower than a 100 ms - 1 s reference is never stopped (a 1 s reference with the
  default settings gets 50 + 10 + 390 = 450 s, under the 600 s worker timeout).
* ``BASE_S`` = 50: what does not scale with the reference's time: a first call's JIT
  compilation and autotuning (Triton kernels and their autotuner, cuDNN's benchmark mode,
  ``torch.compile`` where the policy lets it run), the profiler's start-up on the GPU, the
  integrity checks, and a loaded host. With the default timing (``max_seconds`` 10) a tiny
  reference gets 60 s: a correct candidate that takes 20 s per call is stopped around its
  third verification trial, after a minute instead of the worker's 600 s.

``--device-budget`` (``EvalOptions.device_budget``): ``auto`` (the rule), ``off`` (only the
worker timeout), ``SECONDS`` (a fixed budget, the reference not consulted) or ``xFACTOR``
(the rule scaled, e.g. ``x2``). The budget never extends the worker timeout: whichever ends
first stops the worker, and only the budget's end is ``device_budget_exceeded``.

What it does not do: measure (the worker), enforce (``launch/worker_process.py``), or judge
(``pipeline``). Not covered: time before ``verify`` (the candidate's import and ``__init__``,
bounded by the worker timeout). On a device shared by turns, the time the worker waits for
its turn (a turn given up for a run-time compile inside ``forward`` and taken back, the
exclusive turn before timing) does not count: the parent stops the budget's clock meanwhile
(``launch/worker_process.Deadline``), so a pool does not scale the budget by its jobs per device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cuda_agent.core.errors import ConfigError
from cuda_agent.evaluator.worker.protocol import EvalSettings

BASE_S = 50.0
RATIO = 10.0
MIN_TIMED_ROUNDS = 3  # timing's rounds before its time cap may stop it (worker/timing.py)
EXTRA_CALLS = 17  # canary 2, weight probe 4, decoy 2, kernel record 1, stream check 6, profile 2
AUTO = "auto"
OFF = "off"
USAGE = "auto, off, a number of seconds, or xFACTOR (the auto budget scaled, e.g. x2)"


@dataclass(frozen=True)
class BudgetRule:
    """A parsed ``--device-budget``: ``mode`` is auto, off or fixed; ``value`` the scale
    (auto) or the seconds (fixed)."""

    mode: str
    value: float = 1.0

    @classmethod
    def parse(cls, text: str) -> BudgetRule:
        """``ConfigError`` (one line) for an unusable value."""
        spec = str(text).strip().lower()
        if spec in (AUTO, OFF):
            return cls(spec)
        mode, number = (AUTO, spec[1:]) if spec.startswith("x") else ("fixed", spec)
        try:
            value = float(number)
        except ValueError:
            raise ConfigError(f"device budget {text!r}: give {USAGE}") from None
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"device budget {text!r}: must be positive and finite ({USAGE})")
        return cls(mode, value)

    def seconds(self, call_s: float | None, settings: EvalSettings) -> float | None:
        """The budget for a reference call of ``call_s`` seconds (None: no budget; ``auto``
        without a measured reference call has none)."""
        if self.mode == OFF:
            return None
        if self.mode == "fixed":
            return self.value
        if call_s is None or not math.isfinite(call_s) or call_s < 0:
            return None
        return round(self.value * auto_seconds(call_s, settings), 1)


def planned_calls(settings: EvalSettings) -> int:
    """Model calls after ``verify`` starts, both sides counted (see the module docstring)."""
    calls = 2 * settings.trials + EXTRA_CALLS
    if settings.timing.enabled:
        calls += 2 * settings.timing.warmup_calls + 2 * MIN_TIMED_ROUNDS
    return calls


def auto_seconds(call_s: float, settings: EvalSettings) -> float:
    """The rule's budget for a reference call of ``call_s`` seconds."""
    capped = settings.timing.max_seconds if settings.timing.enabled else 0.0
    return BASE_S + capped + RATIO * call_s * planned_calls(settings)
