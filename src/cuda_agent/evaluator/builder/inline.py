"""``load_inline`` / ``load`` calls and CUDA-Agent workdirs turned into ``ExtensionSpec``s.

``inline_spec`` writes exactly what ``torch.utils.cpp_extension.load_inline`` writes:
``main.cpp`` (``#include <torch/extension.h>``, the ``cpp_sources``, the generated pybind11
bindings) and ``cuda.cu`` (``torch/types.h``, ``cuda.h``, ``cuda_runtime.h``, the
``cuda_sources``), plus ``#line`` markers so that compiler errors point at
``cpp_sources:LINE`` / ``cuda_sources:LINE``. Each unit records where stock's implicit
prelude ends (``SourceFile.body_offset``): the builder first tries the unit in the light
layout (``light.py``), which swaps the prelude for the headers the unit can see, and falls
back to this stock text when the light one does not compile.

The same function serves the parent (static pre-build) and the worker (the ``load_inline`` shim),
so both compute the same cache key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.builder.spec import (
    HEADER_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionSpec,
    FlagError,
    SourceFile,
    vet_cuda_flags,
    vet_cxx_flags,
    vet_ld_flags,
)
from cuda_agent.solutions.static import INLINE_POSITIONAL

CPP_PRELUDE = "#include <torch/extension.h>\n"
CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
WORKDIR_MODULE = "cuda_extension"
WORKDIR_CFLAGS: tuple[str, ...] = ()
WORKDIR_CUDA_CFLAGS = ("--use_fast_math",)
INLINE_KWARGS = (  # load_inline's parameters: the positional ones, then keyword-only
    *INLINE_POSITIONAL,
    "is_python_module",
    "with_pytorch_error_handling",
    "keep_intermediates",
    "use_pch",
    "no_implicit_headers",
    "is_standalone",
    "sycl_sources",
    "extra_sycl_cflags",
    "with_sycl",
)


def inline_spec(
    backend: str,
    name: str,
    cpp_sources: Any,
    cuda_sources: Any = None,
    functions: Any = None,
    extra_cflags: Any = None,
    extra_cuda_cflags: Any = None,
    extra_ldflags: Any = None,
    no_implicit_headers: bool = False,
    with_pytorch_error_handling: bool = True,
    **_ignored: Any,
) -> ExtensionSpec:
    """The spec for ``load_inline(name, cpp_sources, cuda_sources, functions, ...)``."""
    cpp = _as_list(cpp_sources, "cpp_sources")
    cuda = _as_list(cuda_sources, "cuda_sources")
    bindings = _bindings(functions, with_pytorch_error_handling)
    files = [
        _unit("main.cpp", "" if no_implicit_headers else CPP_PRELUDE, "cpp_sources", cpp + bindings)
    ]
    if cuda:
        prelude = "" if no_implicit_headers else CUDA_PRELUDE
        files.append(_unit("cuda.cu", prelude, "cuda_sources", cuda))
    return ExtensionSpec(
        name=str(name),
        backend=backend,
        files=tuple(files),
        cflags=vet_cxx_flags(_as_list(extra_cflags, "extra_cflags")),
        cuda_cflags=vet_cuda_flags(_as_list(extra_cuda_cflags, "extra_cuda_cflags")),
        ldflags=vet_ld_flags(_as_list(extra_ldflags, "extra_ldflags")),
        origin="load_inline",
    )


def _unit(name: str, prelude: str, label: str, parts: list[str]) -> SourceFile:
    """Stock's text for one unit (prelude + parts joined by newlines), with a ``#line`` marker."""
    body = f'#line 1 "{label}"\n' + "\n".join(parts) + "\n"
    return SourceFile(name, prelude + body, body_offset=len(prelude))


def file_spec(
    backend: str,
    name: str,
    sources: Any,
    base_dir: Path,
    extra_cflags: Any = None,
    extra_cuda_cflags: Any = None,
    extra_ldflags: Any = None,
    roots: Sequence[Path] = (),
    **_ignored: Any,
) -> ExtensionSpec:
    """The spec for ``load(name, sources=[...])`` with files inside ``base_dir`` or ``roots``.

    Files in ``base_dir`` (the solution folder) are named by their path relative to it. Files
    in one of ``roots`` (the worker's private temporary folder, where a solution may write
    sources at run time) are named relative to the folder that holds them all, so a source
    written to a fresh ``mkdtemp`` folder on every run keeps its name and its cache entry.
    """
    raws = [Path(p) for p in _as_list(sources, "sources")]
    base = base_dir.resolve()
    allowed = [base, *(r.resolve() for r in roots)]
    paths = [(raw, (raw if raw.is_absolute() else base / raw).resolve()) for raw in raws]
    for raw, path in paths:
        if not any(_within(path, root) for root in allowed):
            where = "the solution folder" + (" or its temporary folder" if roots else "")
            raise FlagError(f"source {raw} is outside {where}")
        if not path.is_file():
            raise FlagError(f"source {raw} does not exist")
    elsewhere = [str(p.parent) for _, p in paths if base not in p.parents]
    outer = Path(os.path.commonpath(elsewhere)) if elsewhere else base
    files: dict[str, SourceFile] = {}
    for _, path in paths:
        anchor = base if base in path.parents else outer
        for sibling in path.parent.iterdir():
            if sibling.suffix in HEADER_SUFFIXES and sibling.is_file():
                rel = sibling.relative_to(anchor).as_posix()
                files.setdefault(rel, SourceFile(rel, sibling.read_text(encoding="utf-8")))
        rel = path.relative_to(anchor).as_posix()
        files[rel] = SourceFile(rel, path.read_text(encoding="utf-8"))
    return ExtensionSpec(
        name=str(name),
        backend=backend,
        files=tuple(files.values()),
        cflags=vet_cxx_flags(_as_list(extra_cflags, "extra_cflags")),
        cuda_cflags=vet_cuda_flags(_as_list(extra_cuda_cflags, "extra_cuda_cflags")),
        ldflags=vet_ld_flags(_as_list(extra_ldflags, "extra_ldflags")),
        origin="load",
    )


def _within(path: Path, root: Path) -> bool:
    """``path`` lies in ``root`` on ``root``'s own mount: no folder in between is a mount point.
    Inside bubblewrap, /tmp is the worker's private folder, but folders re-bound under it (a
    checkout or a virtual environment living in the host's /tmp) are not part of it."""
    if root not in path.parents:
        return False
    mounts = _mount_points()
    folder = path.parent
    while folder != root:
        if str(folder) in mounts or os.path.ismount(folder):
            return False
        folder = folder.parent
    return True


def _mount_points() -> set[str]:
    """This process's mount points (bind mounts of the same file system included, which
    ``os.path.ismount`` cannot see)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as info:
            lines = info.read().splitlines()
    except OSError:
        return set()
    points = set()
    for line in lines:
        fields = line.split()
        if len(fields) > 4:
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def workdir_spec(
    backend: str, kernel_files: Mapping[str, str], harness_files: Mapping[str, str]
) -> ExtensionSpec:
    """The ``cuda_extension`` module of a workdir: the harness's binding files plus ``kernels/``.

    ``kernel_files`` maps paths relative to the workdir (``kernels/relu.cu``) to their text;
    ``harness_files`` holds the template's ``binding.cpp`` and ``binding_registry.h``, which
    always come from the harness, never from the workdir.
    """
    files = [SourceFile(name, text) for name, text in sorted(harness_files.items())]
    for rel, text in sorted(kernel_files.items()):
        if rel.endswith(SOURCE_SUFFIXES + HEADER_SUFFIXES):
            files.append(SourceFile(rel, text))
    return ExtensionSpec(
        name=WORKDIR_MODULE,
        backend=backend,
        files=tuple(files),
        cflags=WORKDIR_CFLAGS,
        cuda_cflags=WORKDIR_CUDA_CFLAGS if backend == "cuda" else (),
        origin="workdir",
    )


def _bindings(functions: Any, error_handling: bool) -> list[str]:
    """The ``PYBIND11_MODULE`` block ``load_inline`` generates for ``functions``, verbatim."""
    if functions is None:
        return []
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list | tuple):
        functions = {f: f for f in functions}
    if not isinstance(functions, dict):
        raise FlagError("load_inline: functions must be a string, a list or a dict")
    lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for fn, doc in functions.items():
        target = f"torch::wrap_pybind_function({fn})" if error_handling else str(fn)
        lines.append(f'm.def("{fn}", {target}, "{doc}");')
    lines.append("}")
    return lines


def _as_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable):
        items = list(value)
        if all(isinstance(v, str | Path) for v in items):
            return [str(v) for v in items]
    raise FlagError(f"load_inline: {what} must be a string or a list of strings")
