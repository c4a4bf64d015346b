"""What the parent process adds to a verdict: ``EvalResult.details``, one typed field per key.

The evaluating parent (``evaluator/pipeline.py`` and the parts it calls, the service and the
pools) fills these fields; the worker's own part of a verdict is ``EvalResult.record``. Each
field has one writer, named beside it. ``to_dict`` gives the JSON form ``eval --json``,
results.jsonl and HTTP have always carried (a field left None is not shown; the two profile
parts the parent measures are shown under ``profile``); ``from_dict`` reads that form back,
leaving out keys it does not know and those the worker's record owns.

What it does not do: decide anything, or merge the worker's part in (``EvalResult`` does that).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any

from cuda_agent.core.errors import ConfigError
from cuda_agent.core.policy import Policy, parse_policy

# the parent's parts of ``details.profile`` (the worker's record has the rest)
_PROFILE_PARTS = {"ncu": "ncu_profile", "compile": "compile_profile"}


@dataclass
class EvalDetails:
    """The parent's part of a verdict's ``details`` (see the module docstring)."""

    # pipeline.prepare: what was evaluated, under which seed and policy
    problem_hash: str | None = None
    solution_hash: str | None = None
    solution_kind: str | None = None
    seed: int | None = None
    policy: Policy | None = None
    size: str | None = None
    timings_s: dict[str, float] | None = None  # pipeline: seconds per stage
    static_findings: list[str] | None = None  # pipeline.prepare: the static check's findings
    builds: list[dict[str, Any]] | None = None  # pipeline.prepare: the parent's builds
    # pipeline._absorb_worker: the candidate's worker
    isolation: str | None = None
    worker_start: dict[str, Any] | None = None  # its source and ready_after_s
    device_budget_s: float | None = None
    reference_call_s: float | None = None
    turn_wait_s: float | None = None  # seconds it waited for a shared GPU's turn
    candidate_stdout_tail: str | None = None
    candidate_stderr_tail: str | None = None
    memory_check: dict[str, Any] | None = None  # pipeline._memory_verdict: MemoryCheck.to_dict
    notes: list[str] | None = None  # pipeline._memory_verdict: the parent's note names
    ncu_profile: dict[str, Any] | None = None  # pipeline._add_ncu_metrics (``profile.ncu``)
    compile_profile: dict[str, Any] | None = None  # pipeline._add_compile_baseline (.compile)
    compile_baseline: dict[str, Any] | None = None  # pipeline._add_compile_baseline
    shapes: list[dict[str, Any]] | None = None  # evaluator/checks/shapes.py: one entry per size
    problem_lint_s: float | None = None  # evaluator/checks/task_lint.py: a fresh lint's seconds
    service: dict[str, Any] | None = None  # evaluator/service.py: its pid and count served
    pool_device: str | None = None  # cluster/local.py and ray_pool.py: where it ran
    pool_attempts: int | None = None  # cluster/ray_pool.py: device tries it took

    def profile(self) -> dict[str, Any]:
        """The parent's parts of ``details.profile`` (``ncu``, ``compile``) that are set."""
        parts = {key: getattr(self, name) for key, name in _PROFILE_PARTS.items()}
        return {key: value for key, value in parts.items() if value is not None}

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, as ``details`` shows them (copies)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and f.name not in _PROFILE_PARTS.values():
                out[f.name] = copy.deepcopy(value)
        if profile := self.profile():
            out["profile"] = copy.deepcopy(profile)
        return out

    @classmethod
    def from_dict(cls, details: dict[str, Any]) -> EvalDetails:
        """The parent's part of a shown ``details``; other keys are left out."""
        known = {f.name for f in dataclasses.fields(cls)} - set(_PROFILE_PARTS.values())
        values = {k: v for k, v in details.items() if k in known}
        if "policy" in values:  # a name this version does not know reads as not known
            values["policy"] = _known_policy(values["policy"])
        profile = details.get("profile")
        if isinstance(profile, dict):
            for key, name in _PROFILE_PARTS.items():
                if key in profile:
                    values[name] = profile[key]
        return cls(**values)


def _known_policy(value: Any) -> Policy | None:
    try:
        return parse_policy(str(value))
    except ConfigError:
        return None


def worker_profile(shown: dict[str, Any]) -> dict[str, Any] | None:
    """The worker's part of a shown ``details.profile`` (without the parent's parts)."""
    profile = shown.get("profile")
    if not isinstance(profile, dict):
        return None
    rest = {k: v for k, v in profile.items() if k not in _PROFILE_PARTS}
    return rest or None
