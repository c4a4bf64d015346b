"""``pip install -e .`` reads pyproject.toml without a setuptools deprecation warning."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from cuda_agent.core.version import __version__

REPO = Path(__file__).resolve().parents[1]


def test_pyproject_reads_without_a_deprecation_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from setuptools.config import pyprojecttoml
    from setuptools.dist import Distribution

    monkeypatch.chdir(REPO)  # as pip runs the build backend
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist = pyprojecttoml.apply_configuration(Distribution(), os.fspath(REPO / "pyproject.toml"))
    assert dist.metadata.license_expression == "Apache-2.0"
    assert dist.metadata.version == __version__  # core/version.py, what `--version` prints
