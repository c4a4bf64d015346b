"""The light base header of ``main.cpp`` compiles torch's pybind11 glue at ``-O1``, and only it.

The glue (``torch/csrc/utils/pybind.h``, ``torch/csrc/Exceptions.h``) comes last, inside a
``#pragma GCC optimize("O1")`` region (``light_index.base_header_text``). What is defined inside
the region is compiled at ``-O1`` whatever the unit's level, so every standard, ATen and c10
header the glue would otherwise bring in first must be included before it: a candidate's kernel
using ``std::map`` or ``std::thread`` gets them at its own level. The test preprocesses the
base header as an ``-O3`` unit sees it and lists the files entered for the first time inside
the region.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from cuda_agent.core.paths import builds_dir
from cuda_agent.evaluator.builder.builder import _writable_root
from cuda_agent.evaluator.builder.light_index import GLUE, ensure_index
from cuda_agent.evaluator.builder.toolchain import discover

pytestmark = pytest.mark.slow

ENTERED = re.compile(r'^# \d+ "([^"]+)" 1', re.M)


def _first_entered_inside_region(text: str) -> tuple[set[str], set[str]]:
    """(files first entered before the region, files first entered inside it)."""
    start = text.index("#pragma GCC push_options")
    end = text.index("#pragma GCC pop_options")
    before = {m.group(1) for m in ENTERED.finditer(text, 0, start)}
    inside = {m.group(1) for m in ENTERED.finditer(text, start, end)} - before
    return before, inside


def _preprocessed_base(flags: tuple[str, ...]) -> str:
    toolchain = discover("cpu")
    index = ensure_index(_writable_root(builds_dir()), toolchain, time.monotonic() + 900)
    assert index is not None
    shadow = Path(index.shadow_dir)
    command = [*toolchain.cxx_command(flags), f"-I{shadow}", "-E", "-x", "c++", "-"]
    done = subprocess.run(
        command,
        input=f"#include <{index.base_header['cxx']}>\n",
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_only_the_glue_is_inside_the_o1_region() -> None:
    before, inside = _first_entered_inside_region(_preprocessed_base(("-O3",)))
    assert any(path.endswith(GLUE[0]) for path in inside)  # the region holds the glue
    assert any("/pybind11/" in path for path in inside)
    leaked = sorted(
        path
        for path in inside
        if "/c++/" in path or re.search(r"/include/(ATen|c10)/", path) is not None
    )
    assert leaked == [], "headers a kernel may use, first included at -O1"
    assert any(path.endswith("/map") for path in before)  # brought by the glue, included first


def test_the_region_applies_to_optimised_builds_without_address_sanitizer() -> None:
    for flags in (("-O0",), ("-Os",), ("-O1", "-fsanitize=address")):
        text = _preprocessed_base(flags)
        assert "#pragma GCC optimize" not in text, flags
    assert '#pragma GCC optimize("O1")' in _preprocessed_base(("-O2",))
