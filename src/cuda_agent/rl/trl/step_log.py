"""Per optimizer step of a TRL run: rewards, pass rate, tokens and where the seconds went.

``StepLog(path)`` is a ``transformers.TrainerCallback``. The reward side calls
``scoring_started()`` when a step's completions are handed over for scoring and
``record(reward, passed, seconds, completion_tokens, flags, outcome)`` for each one; the
callback closes the step when the trainer logs it and appends one JSON line to ``path``
(``steps.jsonl`` in the run folder):

* ``step``, ``rewards`` (in order), ``mean_reward``, ``pass_rate`` (the share of completions
  the evaluator found correct), ``completion_tokens`` (summed; from TRL's mean length when the
  reward side does not know them), ``num_tokens`` (TRL's count of tokens seen so far),
  ``flags`` (how many of the step's evaluations raised each integrity flag), ``outcomes``
  (how many replies ended in each of ``curriculum.tasks.OUTCOMES``: no answer, no build,
  rejected, passed; empty when the reward side does not say);
* ``seconds``: ``step`` (from the trainer's step start to its end), ``generation`` (from the
  step start until scoring started: prompt rendering, generation, decoding and, in agentic
  runs, the tool calls), ``evaluation`` (summed over the evaluator calls), ``update`` (the
  rest: log-probabilities, loss, backward, optimizer);
* ``loss`` and ``grad_norm`` as the trainer logged them;
* ``flat_share``: the share of the step's micro-batches whose advantages were all 0 and whose
  forward and backward were skipped (``rl.trl.flat_groups``; ``None`` from another trainer).

What it does not do: time anything inside TRL (the split is by wall clock around the reward
side, one generation per step as our runs are configured), or aggregate across processes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from cuda_agent.rl.trl.flat_groups import FLAT_METRIC

STEPS_FILE = "steps.jsonl"


class StepLog(TrainerCallback):  # type: ignore[misc,unused-ignore]
    def __init__(self, path: Path) -> None:
        self.path = path
        self.steps: list[dict[str, Any]] = []
        self._begin = time.monotonic()
        self._scoring: float | None = None
        self._rewards: list[float] = []
        self._passed: list[bool] = []
        self._evaluation_s = 0.0
        self._tokens: int | None = None
        self._flags: dict[str, int] = {}
        self._outcomes: dict[str, int] = {}
        self._pending: dict[str, Any] | None = None

    # -- the reward side ---------------------------------------------------------------------

    def scoring_started(self) -> None:
        if self._scoring is None:
            self._scoring = time.monotonic()

    def record(
        self,
        reward: float,
        passed: bool,
        seconds: float,
        completion_tokens: int | None = None,
        flags: list[str] | tuple[str, ...] = (),
        outcome: str | None = None,
    ) -> None:
        if self._scoring is None:  # scoring began when this evaluation did
            self._scoring = time.monotonic() - seconds
        self._rewards.append(float(reward))
        self._passed.append(bool(passed))
        self._evaluation_s += seconds
        if completion_tokens is not None:
            self._tokens = (self._tokens or 0) + completion_tokens
        for flag in flags:
            self._flags[flag] = self._flags.get(flag, 0) + 1
        if outcome is not None:
            self._outcomes[outcome] = self._outcomes.get(outcome, 0) + 1

    # -- the trainer's events ----------------------------------------------------------------

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._begin = time.monotonic()
        self._scoring, self._rewards, self._passed = None, [], []
        self._evaluation_s, self._tokens, self._flags = 0.0, None, {}
        self._outcomes = {}

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        end = time.monotonic()
        step_s = end - self._begin
        generation_s = (self._scoring or end) - self._begin
        rewards = self._rewards
        self._pending = {
            "step": int(state.global_step),
            "rewards": rewards,
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            "pass_rate": sum(self._passed) / len(self._passed) if self._passed else None,
            "completion_tokens": self._tokens,
            "flags": dict(sorted(self._flags.items())),
            "outcomes": dict(sorted(self._outcomes.items())),
            "seconds": {
                "step": round(step_s, 3),
                "generation": round(generation_s, 3),
                "evaluation": round(self._evaluation_s, 3),
                "update": round(max(0.0, step_s - generation_s - self._evaluation_s), 3),
            },
        }

    def on_log(
        self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        if self._pending is None or not logs or "loss" not in logs:
            return
        entry, self._pending = self._pending, None
        if entry["completion_tokens"] is None and "completions/mean_length" in logs:
            entry["completion_tokens"] = round(
                float(logs["completions/mean_length"]) * len(entry["rewards"])
            )
        entry["num_tokens"] = logs.get("num_tokens")
        entry["loss"] = logs.get("loss")
        entry["grad_norm"] = logs.get("grad_norm")
        entry["flat_share"] = logs.get(FLAT_METRIC)
        self.steps.append(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
