"""The toolchain is found once per installation: later processes read it without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.evaluator.builder import toolchain_record

FIND = """
import json, sys
from cuda_agent.evaluator.builder.toolchain import discover
toolchain = discover("cpu")
print(json.dumps({"cxx": toolchain.cxx, "torch": "torch" in sys.modules}))
"""


def _fresh(cache: Path, **env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", FIND],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CUDA_AGENT_CACHE": str(cache), **env},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_second_process_reads_the_record_and_imports_no_torch(tmp_path: Path) -> None:
    first = _fresh(tmp_path)
    assert first["torch"] is True  # discovering imports torch
    records = list((tmp_path / "builds" / "toolchains").glob("cpu-*.json"))
    assert len(records) == 1
    second = _fresh(tmp_path)
    assert second == {"cxx": first["cxx"], "torch": False}


def test_a_record_whose_seal_fails_is_made_again(tmp_path: Path) -> None:
    _fresh(tmp_path)
    (record,) = (tmp_path / "builds" / "toolchains").glob("cpu-*.json")
    fields = json.loads(record.read_text())
    fields["cxx"] = "/tmp/evil-g++"  # a forged compiler
    record.write_text(json.dumps(fields))
    again = _fresh(tmp_path)
    assert again["cxx"] != "/tmp/evil-g++" and again["torch"] is True


def test_the_fingerprint_follows_what_decides_the_toolchain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = toolchain_record.fingerprint("cuda")
    assert toolchain_record.fingerprint("cuda") == base
    assert toolchain_record.fingerprint("cpu") != base
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")
    assert toolchain_record.fingerprint("cuda") != base
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    monkeypatch.setenv("CXX", "/usr/bin/clang++")
    assert toolchain_record.fingerprint("cuda") != base
