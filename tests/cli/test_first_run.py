"""Issue 50 item 9: the very first ``eval`` on a machine (an empty cache), through the real CLI.

What a cold cache must not cost: a one-character syntax error in a ``load_inline`` source is
reported from the light layout and stock's syntax-only pass, without first precompiling
``torch/extension.h`` (0.75 GB) for a compile that fails anyway.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cuda_agent.examples import examples_root
from tests.helpers import run_cli

RELU_CPU = examples_root() / "relu" / "cpu.py"


def built_headers(cache: Path) -> list[str]:
    """The text of each precompiled header in ``cache`` that has its ``.gch``."""
    found = (cache / "builds" / "pch").glob("*/ca_prelude.h")
    return [h.read_text() for h in found if h.with_name(h.name + ".gch").exists()]


@pytest.mark.slow
def test_a_syntax_error_on_a_cold_cache_precompiles_no_stock_header(tmp_path: Path) -> None:
    source = RELU_CPU.read_text()
    typo = tmp_path / "relu_typo.py"
    typo.write_text(source.replace("x.contiguous();", "x.contiguous()", 1))
    cache = tmp_path / "cache"

    out = run_cli(
        "eval", "relu", str(typo), "--backend", "cpu", "--json", "--no-service",
        env={"CUDA_AGENT_CACHE": str(cache)},
    )  # fmt: skip

    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["flags"] == ["build_failed"]
    first = result["error"]["message"].splitlines()[1]
    assert first.startswith("cpp_sources:8:3: error: expected") and "auto" in first, first
    assert result["details"]["builds"][0]["layouts"] == {"main.cpp": "stock (light failed)"}
    headers = built_headers(cache)
    assert headers and not any("torch/extension.h" in h for h in headers), headers


@pytest.mark.slow
def test_the_memory_check_says_in_a_log_that_it_builds_again_on_cpu() -> None:
    """Most of a cold check is its own build (``-fsanitize=address`` needs its own precompiled
    header: g++ refuses one built without it), so the stage's line says so."""
    out = run_cli("eval", "relu", str(RELU_CPU), "--backend", "cpu", "--baselines", "eager",
                  "--no-service")  # fmt: skip
    assert out.returncode == 0, out.stderr
    memory = [line for line in out.stderr.splitlines() if "memory:" in line]
    assert memory and "AddressSanitizer: the extension built again" in memory[0], memory
