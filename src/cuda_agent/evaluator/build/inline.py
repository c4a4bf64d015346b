"""``load_inline`` / ``load`` calls and CUDA-Agent workdirs turned into ``ExtensionSpec``s.

This reproduces what ``torch.utils.cpp_extension.load_inline`` writes (``main.cpp`` with the
implicit include and generated pybind11 bindings, ``cuda.cu`` with its implicit includes), with
two differences that make builds fast and errors readable:

* light headers: ``torch/extension.h`` (all of libtorch's C++ frontend) is replaced by
  ``torch/types.h`` plus torch's pybind11 casters, unless the sources use the C++ frontend
  (``torch::nn``, ``torch::optim``...);
* ``#line`` markers, so compiler errors point at ``cpp_sources:LINE`` / ``cuda_sources:LINE``.

The same function serves the parent (static pre-build) and the worker (the ``load_inline`` shim),
so both compute the same cache key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.build.spec import (
    HEADER_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionSpec,
    FlagError,
    SourceFile,
    vet_cuda_flags,
    vet_cxx_flags,
    vet_ld_flags,
)

HEAVY_API = re.compile(r"\btorch::(nn|optim|autograd|jit|data|serialize|python)\b")
EXTENSION_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]torch/extension\.h[>\"].*$", re.M)
LIGHT_CPP_PRELUDE = "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n"
HEAVY_CPP_PRELUDE = "#include <torch/extension.h>\n"
CUDA_PRELUDE = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
WORKDIR_MODULE = "cuda_extension"
WORKDIR_CFLAGS: tuple[str, ...] = ()
WORKDIR_CUDA_CFLAGS = ("--use_fast_math",)
INLINE_KWARGS = (
    "name",
    "cpp_sources",
    "cuda_sources",
    "functions",
    "extra_cflags",
    "extra_cuda_cflags",
    "extra_ldflags",
    "extra_include_paths",
    "build_directory",
    "verbose",
    "with_cuda",
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
    **_ignored: Any,
) -> ExtensionSpec:
    """The spec for ``load_inline(name, cpp_sources, cuda_sources, functions, ...)``."""
    cpp = _as_list(cpp_sources, "cpp_sources")
    cuda = _as_list(cuda_sources, "cuda_sources")
    all_text = "\n".join(cpp + cuda)
    heavy = bool(HEAVY_API.search(all_text))
    cpp_text = "\n".join(cpp) if heavy else _strip_extension_include("\n".join(cpp))
    prelude = "" if no_implicit_headers else (HEAVY_CPP_PRELUDE if heavy else LIGHT_CPP_PRELUDE)
    main = f'{prelude}#line 1 "cpp_sources"\n{cpp_text}\n{_bindings(functions)}'
    files = [SourceFile("main.cpp", main)]
    if cuda:
        cuda_text = "\n".join(cuda) if heavy else _strip_extension_include("\n".join(cuda))
        cuda_prelude = "" if no_implicit_headers else CUDA_PRELUDE
        files.append(SourceFile("cuda.cu", f'{cuda_prelude}#line 1 "cuda_sources"\n{cuda_text}\n'))
    return ExtensionSpec(
        name=str(name),
        backend=backend,
        files=tuple(files),
        cflags=vet_cxx_flags(_as_list(extra_cflags, "extra_cflags")),
        cuda_cflags=vet_cuda_flags(_as_list(extra_cuda_cflags, "extra_cuda_cflags")),
        ldflags=vet_ld_flags(_as_list(extra_ldflags, "extra_ldflags")),
        origin="load_inline",
    )


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
        if not any(root in path.parents for root in allowed):
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


def _bindings(functions: Any) -> str:
    if functions is None:
        return ""
    if isinstance(functions, str):
        functions = [functions]
    if isinstance(functions, list | tuple):
        functions = {f: f for f in functions}
    if not isinstance(functions, dict):
        raise FlagError("load_inline: functions must be a string, a list or a dict")
    lines = ["PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {"]
    for fn, doc in functions.items():
        if not re.match(r"^[A-Za-z_]\w*$", str(fn)):
            raise FlagError(f"load_inline: {fn!r} is not a C++ function name")
        doc_text = str(doc).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'  m.def("{fn}", &{fn}, "{doc_text}");')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _strip_extension_include(text: str) -> str:
    """Blank out ``#include <torch/extension.h>`` (keeping line numbers); the prelude covers it."""
    return EXTENSION_INCLUDE.sub("", text)


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
