"""Fixtures shared by the evaluator's tests."""

from __future__ import annotations

import pytest

from cuda_agent.workspace.isolation import IsolationUnavailable
from cuda_agent.workspace.sandbox import worker_isolation


@pytest.fixture
def confine(monkeypatch: pytest.MonkeyPatch) -> str:
    """Evaluation workers under ``confine`` for the test (forked from a template); the test is
    skipped where that mode does not isolate here (no Landlock, not root)."""
    monkeypatch.setenv("CUDA_AGENT_ISOLATION", "confine")
    try:
        mode = worker_isolation(gpu=False)
    except IsolationUnavailable:
        mode = "none"
    if mode == "none":
        pytest.skip("no confine isolation here (needs Landlock or root)")
    return mode
