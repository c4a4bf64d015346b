"""The cpu memory check's worker is forked from a template started under AddressSanitizer
(``launch/asan.py``, ``launch/worker_template.py``), where workers are forked at all (the
``confine`` mode here), and its report is still its own: a fixture's finding is read from the
file its worker wrote, and the verdict is the one a worker started as a process of its own gives
(``CUDA_AGENT_WORKER_TEMPLATE=0``).

What it does not check: the findings themselves (the M fixtures in ``tests/adversarial`` do) or
bubblewrap (which starts each worker as a process of its own).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.adversarial.catalogue import FIXTURES
from tests.helpers import fast_options

pytestmark = pytest.mark.slow  # an AddressSanitizer build (shared) and checked workers


def check_of(name: str) -> tuple[Any, dict[str, Any]]:
    result = evaluate(
        resolve_problem("relu", "small"),
        load_solution(FIXTURES / f"{name}.py"),
        fast_options(memory_check=True, use_memory_check_cache=False),
    )
    return result, result.details.memory_check or {}


def test_the_asan_worker_is_forked_from_the_template_and_reads_its_own_report(
    confine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    found, check = check_of("m1_read_past_end")
    assert check.get("started") == "template", check
    assert "memory_error:access" in found.flags and check["errors"] == 1
    assert "heap-buffer-overflow READ" in check["findings"][0]

    monkeypatch.setenv("CUDA_AGENT_WORKER_TEMPLATE", "0")
    alone, own = check_of("m1_read_past_end")
    assert own["started"] == "process"
    assert sorted(alone.flags) == sorted(found.flags)
    assert own["errors"] == check["errors"]
    assert [_unplaced(f) for f in own["findings"]] == [_unplaced(f) for f in check["findings"]]


def _unplaced(finding: str) -> str:
    """A finding without its addresses (each process's heap lies elsewhere)."""
    return re.sub(r"0x[0-9a-f]+", "0x", finding)
