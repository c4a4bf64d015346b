"""What a run folder's results were judged under, so that a rerun resumes only the same run.

``bench run`` records a fingerprint in ``run.json`` before it evaluates anything: the options
that change a verdict (backend, policy, baselines, memory check, device budget), the problem
set (its ids and content hashes: ``--problems``, ``--levels`` and ``--size`` together) and
where the candidates come from (the solutions folder, or the model and its limits). A rerun
into the same ``--out`` with finished results and a different fingerprint is refused, naming
the first option that differs; ``--fresh`` discards the folder's results first.

What it does not do: notice a solution file edited in place (the folder's path is recorded,
not its contents), nor judge options that only change how a run is spread (workers, Ray,
``--jobs-per-gpu``, ``--parallel``, ``--attempts``: more attempts add to the earlier ones),
nor the model's ``--base-url`` (the same model served elsewhere after a restart).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from cuda_agent.bench.records import RESULTS_FILE, RUN_FILE, STARTED_FILE, read_run_info
from cuda_agent.core.errors import ConfigError
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.options import EvalOptions

FINGERPRINT_KEY = "fingerprint"

# fingerprint key -> the command-line option(s) that set it, for the refusal's line
OPTION_NAMES = {
    "mode": "--solutions/--model",
    "backend": "--backend",
    "policy": "--policy",
    "baselines": "--baselines",
    "memory_check": "--memory-check",
    "device_budget": "--device-budget",
    "problems": "--problems/--levels/--size",
    "solutions": "--solutions",
    "model": "--model",
    "tool_format": "--tool-format",
    "max_turns": "--max-turns",
    "max_output_tokens": "--max-output-tokens",
    "context_tokens": "--context-tokens",
}


def problem_set_id(problems: list[Problem]) -> str:
    """``6 problems, sha256 1a2b3c4d5e6f``: the ids and contents of the set, in a short line."""
    digest = hashlib.sha256()
    for problem in sorted(problems, key=lambda p: p.id):
        digest.update(f"{problem.id}\0{problem.content_hash}\n".encode())
    return f"{len(problems)} problems, sha256 {digest.hexdigest()[:12]}"


def fingerprint(
    options: EvalOptions, problems: list[Problem], source: dict[str, str]
) -> dict[str, str]:
    """The run's fingerprint; ``source`` names where candidates come from (``mode`` and
    ``solutions``, or ``mode``, ``model`` and the agent's limits)."""
    return {
        "backend": options.backend,
        "policy": options.policy,
        "baselines": ",".join(options.baselines) or "(none)",
        "memory_check": "on" if options.memory_check else "off",
        "device_budget": str(options.device_budget),
        "problems": problem_set_id(problems),
        **source,
    }


def has_results(run_dir: Path) -> bool:
    return any((run_dir / name).is_file() for name in (RESULTS_FILE, STARTED_FILE))


def first_difference(recorded: dict[str, Any], wanted: dict[str, str]) -> str | None:
    """The first key whose value differs (a key only one side has counts), or None."""
    for key in [*wanted, *(k for k in recorded if k not in wanted)]:
        if str(recorded.get(key)) != str(wanted.get(key)):
            return key
    return None


def check_resume(run_dir: Path, wanted: dict[str, str]) -> str | None:
    """Raise ConfigError (one line) when ``run_dir`` holds results judged under another
    fingerprint; a note to show when it holds results with none recorded (an older run)."""
    if not has_results(run_dir):
        return None
    recorded = read_run_info(run_dir).get(FINGERPRINT_KEY)
    if not isinstance(recorded, dict):
        return f"note: {run_dir} records no options (made by an older version): resuming unchecked"
    key = first_difference(recorded, wanted)
    if key is None:
        return None
    option = OPTION_NAMES.get(key, key)
    raise ConfigError(
        f"{run_dir} holds results made with {option} {_shown(recorded.get(key))}, this run "
        f"asks for {option} {_shown(wanted.get(key))}: they would mix; give a new --out, "
        f"or --fresh to discard its results"
    )


def _shown(value: object) -> str:
    return "(not set)" if value is None else repr(str(value))


def discard_results(run_dir: Path) -> None:
    """``--fresh``: remove what ``bench run`` wrote in ``run_dir`` (other files stay)."""
    for name in (RESULTS_FILE, STARTED_FILE, RUN_FILE):
        (run_dir / name).unlink(missing_ok=True)
    shutil.rmtree(run_dir / "episodes", ignore_errors=True)
