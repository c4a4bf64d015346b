"""The memory check's verdicts, cached by solution, problem and device.

In RL the same answer is scored again and again (a re-run, a repeated rollout, the same kernel
in several groups); its memory check would find the same thing each time. A complete check's
answer (what the checker counted and found, whether the output survived the NaN fill) is kept
under ``<cache>/memory-checks/`` as a signed entry (``core/signed_entries.py``), keyed by
everything the answer depends on: the solution's and the problem's content hashes (the problem
text holds its size), the backend, the device, torch and CUDA, the policy (how the candidate
gets its weights), the precision policy, the tolerance, the checker, and the source of the
harness code that runs the check (an edit of the check makes every answer new). The seed is
not in the key: the same answer with other inputs is the point. A check that gave no answer
(``incomplete``) is not kept. An entry that fails its signature is checked again. Only the
harness process reads and writes it.

What it does not do: decide whether a check runs (``evaluator/checks/memory_safety.py`` asks here
first) or keep anything about the rest of a verdict.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root, ensure_dir, package_root
from cuda_agent.core.policy import Policy
from cuda_agent.core.signed_entries import read_entry, write_entry
from cuda_agent.core.types import Problem, Solution

CACHE_VERSION = "1"
# the harness code an answer depends on (relative to the package)
CHECK_SOURCES = (
    "evaluator/checks/memory_safety.py",
    "evaluator/checks/memory_reports.py",
    "evaluator/worker/modes/memory_check.py",
    "evaluator/worker/kernel_symbols.py",
    "evaluator/worker/candidate.py",
    "evaluator/worker/compare.py",
    "evaluator/builder/spec.py",
)


@functools.cache
def harness_digest() -> str:
    """A digest of the check's own code (``CHECK_SOURCES``)."""
    digest = hashlib.sha256()
    for rel in CHECK_SOURCES:
        digest.update((package_root() / rel).read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CheckKey:
    """What a memory check's answer depends on."""

    problem: Problem
    solution: Solution
    backend: str
    device: dict[str, Any]
    policy: Policy
    precision: str
    atol: float | None
    rtol: float | None
    tool: str

    def digest(self) -> str:
        parts = [
            CACHE_VERSION,
            harness_digest(),
            self.problem.content_hash,
            self.solution.content_hash,
            self.backend,
            self.policy,
            str(self.device.get("device")),
            str(self.device.get("torch")),
            str(self.device.get("cuda")),
            self.precision,
            repr(self.atol),
            repr(self.rtol),
            self.tool,
        ]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def memory_checks_dir() -> Path:
    return cache_root() / "memory-checks"


def cached_answer(key: CheckKey) -> dict[str, Any] | None:
    """The answer kept for ``key`` (None: none, or one that failed its signature)."""
    digest = key.digest()
    return read_entry(memory_checks_dir() / f"{digest}.json", digest)


def keep_answer(key: CheckKey, answer: dict[str, Any]) -> None:
    digest = key.digest()
    write_entry(ensure_dir(memory_checks_dir()) / f"{digest}.json", digest, answer)
