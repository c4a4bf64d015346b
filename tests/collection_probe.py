"""A pytest plugin for ``test_collection.py``: which test files does collection reach?

Loaded with ``-p tests.collection_probe``. For every file that the run's own configuration
(``testpaths``, ``norecursedirs``, ``python_files``, conftest ``collect_ignore``...) would
collect as a test module, it appends the file's path to the file named by
``CUDA_AGENT_COLLECTION_PROBE`` and hands pytest an empty collector instead of importing the
module, so the probe costs a directory walk, not the suite's imports.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

OUT_ENV = "CUDA_AGENT_COLLECTION_PROBE"


class _NotImported(pytest.File):
    def collect(self) -> list[pytest.Item]:
        return []


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File:
    with open(os.environ[OUT_ENV], "a", encoding="utf-8") as out:
        out.write(f"{module_path}\n")
    return _NotImported.from_parent(parent, path=module_path)
