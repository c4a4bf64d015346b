"""Spare workers do not outlive the test that started them.

Spare workers are kept per worker environment, and pytest sets ``PYTEST_CURRENT_TEST`` to a new
value for every test, so a spare started for one test is never taken by the next: without this
fixture every test of a module leaves one started worker behind (about 250 MB each) until the
session ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cuda_agent.evaluator.pipeline import spare_workers


@pytest.fixture(autouse=True)
def discard_idle_spares() -> Iterator[None]:
    yield
    spare_workers().close()
