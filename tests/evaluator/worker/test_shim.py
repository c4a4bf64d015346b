"""The worker's ``load_inline`` / ``load`` shim, in process: what it raises, what it remembers.

Real builds with the cpu backend (failing ones compile in well under a second: no torch headers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.builder.inline import file_spec, inline_spec
from cuda_agent.evaluator.builder.spec import FlagError
from cuda_agent.evaluator.worker.shim import (
    BuildShim,
    ExtensionBuildError,
    diagnostics_of,
    failure_key,
)

BROKEN = "int twice(int x) {\n  return x * missing_factor;\n}\n"


def shim(tmp_path: Path, **kw: object) -> BuildShim:
    root = tmp_path / "solution"
    root.mkdir(exist_ok=True)
    return BuildShim("cpu", root, 120.0, **kw)  # type: ignore[arg-type]


def test_a_failed_build_raises_runtime_error_like_stock_torch_and_is_remembered(
    tmp_path: Path,
) -> None:
    s = shim(tmp_path)
    with pytest.raises(RuntimeError) as caught:
        s.load_inline("ca_shim_broken", BROKEN, no_implicit_headers=True)
    err = caught.value
    assert isinstance(err, ExtensionBuildError)
    assert str(err).startswith("Error building extension 'ca_shim_broken': compilation failed")
    assert "cpp_sources:2:" in err.diagnostics and "missing_factor" in err.diagnostics
    assert s.failure == err.diagnostics == s.builds[0].error
    with pytest.raises(ExtensionBuildError):  # again: the same error, no second compile
        s.load_inline("ca_shim_broken", BROKEN, no_implicit_headers=True)
    assert len(s.builds) == 1


def test_a_build_that_failed_in_the_parent_fails_at_once(tmp_path: Path) -> None:
    spec = inline_spec("cpu", "ca_shim_broken", BROKEN, no_implicit_headers=True)
    s = shim(tmp_path, known_failures={failure_key(spec): "the parent's diagnostics"})
    with pytest.raises(ExtensionBuildError, match="the parent's diagnostics"):
        s.load_inline("ca_shim_broken", BROKEN, no_implicit_headers=True)
    assert s.builds == [] and s.failure == "the parent's diagnostics"


def test_a_refused_flag_is_a_build_failure(tmp_path: Path) -> None:
    s = shim(tmp_path)
    with pytest.raises(RuntimeError, match="not allowed"):
        s.load_inline("ca_shim_flags", BROKEN, extra_cflags=["-fplugin=evil.so"])
    assert s.failure is not None and "-fplugin=evil.so" in s.failure


def test_diagnostics_survive_a_reraise() -> None:
    try:
        try:
            raise ExtensionBuildError("ext", "main.cpp:1: error: no")
        except RuntimeError as inner:
            raise ValueError("CUDA unavailable") from inner
    except ValueError as outer:
        assert diagnostics_of(outer) == "main.cpp:1: error: no"
    assert diagnostics_of(KeyError("x")) is None


def test_failure_key_follows_the_sources_and_flags() -> None:
    a = inline_spec("cpu", "ext", BROKEN, no_implicit_headers=True)
    b = inline_spec("cpu", "ext", BROKEN + "\n", no_implicit_headers=True)
    c = inline_spec("cpu", "ext", BROKEN, no_implicit_headers=True, extra_cflags=["-O2"])
    same = inline_spec("cpu", "ext", BROKEN, no_implicit_headers=True)
    assert failure_key(a) == failure_key(same)
    assert len({failure_key(a), failure_key(b), failure_key(c)}) == 3


def test_load_takes_sources_from_the_temporary_folder_named_stably(tmp_path: Path) -> None:
    base, tmp = tmp_path / "solution", tmp_path / "private" / "tmp"
    for i, folder in enumerate((tmp / "tmpa1b2", tmp / "tmpz9y8")):
        folder.mkdir(parents=True)
        (folder / "ops.cpp").write_text('#include "ops.h"\nint f() { return K; }\n')
        (folder / "ops.h").write_text("#define K 3\n")
        base.mkdir(exist_ok=True)
        spec = file_spec("cpu", "ext", [str(folder / "ops.cpp")], base, roots=[tmp])
        assert {f.name for f in spec.files} == {"ops.cpp", "ops.h"}, i
        if i == 0:
            first = failure_key(spec)
    assert failure_key(spec) == first  # a fresh mkdtemp folder keeps the cache key


def test_load_keeps_solution_relative_names_and_refuses_other_folders(tmp_path: Path) -> None:
    base = tmp_path / "solution"
    (base / "kernels").mkdir(parents=True)
    (base / "kernels" / "a.cpp").write_text("int a() { return 1; }\n")
    spec = file_spec("cpu", "ext", ["kernels/a.cpp"], base, roots=[tmp_path / "private"])
    assert [f.name for f in spec.files] == ["kernels/a.cpp"]
    (tmp_path / "elsewhere.cpp").write_text("int b() { return 2; }\n")
    with pytest.raises(FlagError, match="outside the solution folder or its temporary folder"):
        file_spec("cpu", "ext", [str(tmp_path / "elsewhere.cpp")], base, roots=[base / "x"])
    with pytest.raises(FlagError, match=r"outside the solution folder$"):
        file_spec("cpu", "ext", [str(tmp_path / "elsewhere.cpp")], base)
