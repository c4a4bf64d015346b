"""Test configuration: a shared build cache for the session and fast timing defaults.

Builds are cached under ``.cache/cuda-agent-tests`` in the repository (or wherever
``CUDA_AGENT_CACHE`` points), so repeated runs skip compiler work; tests that need a cold build
use sources nobody compiled before.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("CUDA_AGENT_CACHE", str(REPO / ".cache" / "cuda-agent-tests"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CUDA_AGENT_GPU_TESTS") == "1":
        return
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
