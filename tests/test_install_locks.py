"""``scripts/install_locks.py`` gives uv the package sources pip is configured with.

uv reads no pip configuration; the installer asks pip (``pip config list``, a real pip
process here, with a configuration file and environment variables of the test's own) and
turns what it says into uv's arguments. A wrong source would install other files than pip
would (the lock pins ``torch==2.13.0``, whose CPU build comes from a local folder on the CI
machine and whose PyPI build is the multi-GB CUDA one).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "install_locks.py"


def installer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_locks", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_index_and_link_of_pip_becomes_a_uv_argument() -> None:
    config = {
        "index-url": "https://mirror.example/simple",
        "extra-index-url": "file:///opt/a/simple  file:///opt/b/simple",
        "find-links": "/opt/wheels",
        "cert": "/etc/ssl/bundle.crt",
    }
    assert installer().uv_source_args(config) == [
        *("--index-strategy", "unsafe-best-match"),
        *("--index-url", "https://mirror.example/simple"),
        *("--extra-index-url", "file:///opt/a/simple"),
        *("--extra-index-url", "file:///opt/b/simple"),
        *("--find-links", "/opt/wheels"),
    ]
    assert installer().uv_source_args({}) == ["--index-strategy", "unsafe-best-match"]


def test_pip_config_is_read_from_pip_with_the_environment_winning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_file = tmp_path / "pip.conf"
    config_file.write_text(
        "[global]\nindex-url = https://file.example/simple\nfind-links = /from/file\ntimeout = 5\n",
        encoding="utf-8",
    )
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config_file))
    monkeypatch.setenv("PIP_FIND_LINKS", "/from/env")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///x/simple file:///y/simple")
    found = installer().pip_config(sys.executable)
    assert "timeout" not in found  # not a source
    assert found["index-url"] == "https://file.example/simple"
    assert found["find-links"] == "/from/env"  # the environment's, as pip itself would use
    assert found["extra-index-url"] == "file:///x/simple file:///y/simple"
