"""Build (once per toolchain) what the light layout needs: a shadow folder and a name index.

* The shadow folder (``builds/light/<key>/shadow``, placed first on the include path of light
  compiles only) holds: copies of torch's generated operator headers without their
  ``ATen/Context.h`` / ``ATen/DeviceGuard.h`` includes; ``torch/types.h`` without its includes
  (its ``torch`` namespace aliases on top of ``ATen/core/Tensor.h``); and one base header per
  kind of unit (``ca_light_cuda.h`` for ``.cu`` files, ``ca_light_cxx.h`` for ``main.cpp``,
  whose pybind11 glue comes last and compiles at ``-O1``: ``base_header_text``).
  Every file is derived from the installed torch headers when the index is built; none is
  stored in this repository.
* The index: the stock umbrella (``torch/types.h`` then ``torch/extension.h``) is preprocessed
  (``-E -dD``, with nvcc's host-side macros on the cuda backend) and scanned
  (``cxxscan.DeclarationScanner``): for each header, the names it declares at namespace scope
  and the macros it defines; for each macro, the identifiers of its definition; and, per kind,
  the headers the base header already pulls in.
* ``identifiers.txt``: every identifier of the stock umbrella's headers (raw text of each, and
  the preprocessed umbrella), so a failed light compile can tell whether stock's extra headers
  could have declared a name it missed (``light_failure.py``).

Building takes a few seconds of preprocessing and about ten of scanning; the result is keyed by
the toolchain's identity and stored atomically, so concurrent workers build it at most once
each and then share it. ``warm_up`` in ``builder.py`` builds it ahead of the first candidate.
If anything fails, ``ensure_index`` returns None and builds use the stock layout only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cuda_agent.core.paths import builds_dir
from cuda_agent.evaluator.builder.cache_entry import locked
from cuda_agent.evaluator.builder.cxxscan import DeclarationScanner
from cuda_agent.evaluator.builder.light import LightIndex
from cuda_agent.evaluator.builder.toolchain import CXX_STD, EXTENSION_DEFINE, Toolchain

log = logging.getLogger(__name__)

INDEX_VERSION = "6"
IDENTIFIERS_FILE = "identifiers.txt"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BASE_COMMON = (
    "ATen/core/Tensor.h",
    "ATen/Dispatch.h",
    "ATen/ops/empty_like.h",  # TensorOperators.h expects it from ATen/Functions.h
    "ATen/TensorOperators.h",
    "ATen/TensorUtils.h",
    "ATen/TracerMode.h",
    "ATen/core/Generator.h",
    "ATen/core/Reduction.h",
    "c10/core/Scalar.h",
    "c10/core/Storage.h",
    "c10/core/TensorOptions.h",
    "c10/util/Deprecated.h",
    "c10/util/OptionalArrayRef.h",
    "optional",
    "string_view",
    "torch/types.h",  # the shadow copy: its namespace aliases, none of its includes
)
GLUE = ("torch/csrc/utils/pybind.h", "torch/csrc/Exceptions.h")
BASE_EXTRA = {"cuda": ("cuda.h", "cuda_runtime.h"), "cxx": GLUE}
# when the glue region of ``main.cpp``'s base header applies (``base_header_text``)
GLUE_AT_O1 = (
    "defined(__OPTIMIZE__) && !defined(__OPTIMIZE_SIZE__) && !defined(__SANITIZE_ADDRESS__)"
)
HEAVY_OP_INCLUDES = re.compile(r"^#include <ATen/(Context|DeviceGuard)\.h>\n", re.M)
OP_INCLUDE = re.compile(r"^#include <ATen/ops/(\w+)\.h>", re.M)
OP_INCLUDE_LINE = re.compile(r"^#include <ATen/ops/(\w+)\.h>.*\n", re.M)
ANY_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"].*\n", re.M)
NOT_INCLUDABLE = re.compile(r"(^|/)(bits|ext|cpython|crt|internal)/|^pybind11/detail/")
MARKER = re.compile(r'^# \d+ "([^"]+)"', re.M)


def index_dir(root: Path, toolchain: Toolchain) -> Path:
    return root / "light" / _key(toolchain)


def load_index(folder: Path) -> LightIndex | None:
    path = folder / "index.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if data.get("version") != INDEX_VERSION:
        return None
    return LightIndex(
        files=tuple(data["files"]),
        include_as=tuple(data["include_as"]),
        levels=tuple(data["levels"]),
        names={k: tuple((int(i), str(ns)) for i, ns in v) for k, v in data["names"].items()},
        macro_names={k: tuple(v) for k, v in data["macros"].items()},
        base={k: frozenset(v) for k, v in data["base"].items()},
        base_header=dict(data["base_header"]),
        namespaces=frozenset(data["namespaces"]),
        shadow_dir=str(folder / "shadow"),
        key=folder.name,
    )


def ensure_index(root: Path, toolchain: Toolchain, deadline: float) -> LightIndex | None:
    """The toolchain's light index, building it (under a lock) when missing.

    A read-only shared cache (a sandboxed worker) still serves an index built there.
    """
    shared = _safe_load(index_dir(builds_dir(), toolchain))
    if shared is not None:
        return shared
    folder = index_dir(root, toolchain)
    index = _safe_load(folder)
    if index is not None or (folder / "FAILED").exists():
        return index

    with locked(folder.parent / f"{folder.name}.lock", deadline):
        index = _safe_load(folder)
        if index is not None:
            return index
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix="light-", dir=folder.parent))
        try:
            _build(tmp, toolchain, max(30.0, deadline - time.monotonic()))
            if folder.exists():
                shutil.rmtree(tmp)
            else:
                os.replace(tmp, folder)
        except (OSError, subprocess.SubprocessError, ValueError) as err:
            log.warning("light header index not built (%s); builds use stock headers", err)
            shutil.rmtree(tmp, ignore_errors=True)
            with contextlib.suppress(OSError):
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "FAILED").write_text(str(err)[-4000:], encoding="utf-8")
            return None
        log.info("light header index built in %.1f s", time.monotonic() - started)
    return _safe_load(folder)


_LOADED: dict[str, LightIndex] = {}
_IDENTIFIERS: dict[str, frozenset[str]] = {}


def umbrella_identifiers(index: LightIndex) -> frozenset[str] | None:
    """Every identifier that appears anywhere in the stock umbrella's headers (each header's
    raw text, all branches, and the preprocessed umbrella), or None when not recorded.

    A name absent from it is declared by no header that stock ``load_inline`` would add to a
    unit and the light layout leaves out (``light_failure.py`` relies on that). Read lazily:
    only a failed light compile needs it.
    """
    folder = Path(index.shadow_dir).parent
    cached = _IDENTIFIERS.get(str(folder))
    if cached is None:
        try:
            text = (folder / IDENTIFIERS_FILE).read_text(encoding="utf-8")
        except OSError:
            return None
        cached = _IDENTIFIERS[str(folder)] = frozenset(text.split())
    return cached


def _safe_load(folder: Path) -> LightIndex | None:
    """``load_index``, once per process and folder; None when missing or unreadable."""
    cached = _LOADED.get(str(folder))
    if cached is not None:
        return cached
    try:
        index = load_index(folder)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if index is not None:
        _LOADED[str(folder)] = index
    return index


def _key(toolchain: Toolchain) -> str:
    import hashlib

    text = "\n".join((INDEX_VERSION, toolchain.identity, *toolchain.system_includes))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _build(folder: Path, toolchain: Toolchain, timeout: float) -> None:
    shadow = folder / "shadow"
    roots = [str(shadow), *toolchain.system_includes, *_compiler_dirs(toolchain)]
    kinds = ["cxx", "cuda"] if toolchain.backend == "cuda" else ["cxx"]
    _write_shadow(shadow, toolchain, kinds)
    scanner = DeclarationScanner()
    umbrella = "".join(f"#include <{h}>\n" for h in BASE_EXTRA["cuda"] if "cuda" in kinds)
    umbrella += "#include <torch/types.h>\n#include <torch/extension.h>\n"
    cuda = "cuda" in kinds
    preprocessed = _preprocess(toolchain, umbrella, folder, [], timeout, defines=True, nvcc=cuda)
    scanner.feed(preprocessed)
    identifiers = set(IDENTIFIER.findall(preprocessed))
    if cuda:  # main.cpp is compiled by g++, whose branches of the same headers may differ
        host = _preprocess(toolchain, umbrella, folder, [], timeout, defines=True)
        identifiers |= set(IDENTIFIER.findall(host))
    for path in scanner.order:  # every branch of every header, macro bodies included
        with contextlib.suppress(OSError):
            identifiers |= set(IDENTIFIER.findall(Path(path).read_text(errors="replace")))
    (folder / IDENTIFIERS_FILE).write_text("\n".join(sorted(identifiers)), encoding="utf-8")
    files: list[str] = []
    paths: list[str] = []
    for path in scanner.order:
        spelling = _spelling(path, roots[1:])
        if spelling is not None and spelling not in files:
            files.append(spelling)
            paths.append(path)
    position = {s: i for i, s in enumerate(files)}
    extension_at = position.get("torch/extension.h", len(files))
    by_path = {p: position[s] for p, s in zip(paths, files, strict=True)}
    names: dict[str, list[tuple[int, str]]] = {}
    for path, declared in scanner.names.items():
        if path in by_path:
            for namespace, name in declared:
                names.setdefault(name, []).append((by_path[path], namespace))
    base: dict[str, list[int]] = {}
    for kind in kinds:
        header = f"ca_light_{kind}.h"
        text = _preprocess(
            toolchain,
            f"#include <{header}>\n",
            folder,
            [f"-I{shadow}"],
            timeout,
            nvcc=kind == "cuda",
        )
        seen = {_spelling(p, roots) for p in MARKER.findall(text)}
        base[kind] = sorted(position[s] for s in seen if s in position)
        if kind == "cxx":  # the glue-free part's closure, to find what only the glue brings
            glue_free = "".join(f"#include <{h}>\n" for h in BASE_COMMON)
            free = _preprocess(toolchain, glue_free, folder, [f"-I{shadow}"], timeout)
            glue_only = set(MARKER.findall(text)) - set(MARKER.findall(free))
            first = _glue_first(glue_only, lambda p: _includable(p, scanner.parents, roots[1:]))
            (shadow / "ca_light_cxx.h").write_text(base_header_text(kind, first), encoding="utf-8")
    data = {
        "version": INDEX_VERSION,
        "files": files,
        "include_as": [
            _includable(p, scanner.parents, roots[1:]) or s
            for p, s in zip(paths, files, strict=True)
        ],
        "levels": [1 if i < extension_at else 2 for i in range(len(files))],
        "names": {k: sorted(set(v)) for k, v in names.items()},
        "macros": {k: sorted(v) for k, v in scanner.macros.items() if v},
        "base": base,
        "base_header": {kind: f"ca_light_{kind}.h" for kind in kinds},
        "namespaces": sorted(scanner.namespace_names),
    }
    (folder / "index.json").write_text(json.dumps(data), encoding="utf-8")


def _write_shadow(shadow: Path, toolchain: Toolchain, kinds: list[str]) -> None:
    """Shadow copies of the operator headers and ``torch/types.h``, and the base headers."""
    ops = shadow / "ATen" / "ops"
    ops.mkdir(parents=True)
    functions = _find(toolchain, "ATen/Functions.h")
    for op in OP_INCLUDE.findall(functions.read_text(encoding="utf-8")):
        real = functions.parent / "ops" / f"{op}.h"
        if real.exists():
            text = HEAVY_OP_INCLUDES.sub("", real.read_text(encoding="utf-8"))
            (ops / f"{op}.h").write_text(text, encoding="utf-8")
    text = functions.read_text(encoding="utf-8")
    rest = OP_INCLUDE_LINE.sub("", text)  # keep the operators its own inline functions call
    called = set(re.findall(r"\bat::(\w+)\(", rest))
    kept_ops = OP_INCLUDE_LINE.sub(lambda m: m.group(0) if m.group(1) in called else "", text)
    (shadow / "ATen" / "Functions.h").write_text(
        HEAVY_OP_INCLUDES.sub("", kept_ops), encoding="utf-8"
    )
    types = _find(toolchain, "torch/types.h").read_text(encoding="utf-8")
    kept = ANY_INCLUDE.sub(lambda m: m.group(0) if m.group(1) == "optional" else "", types)
    (shadow / "torch").mkdir()
    (shadow / "torch" / "types.h").write_text(
        "#pragma once\n#include <ATen/core/Tensor.h>\n" + kept, encoding="utf-8"
    )
    for kind in kinds:
        (shadow / f"ca_light_{kind}.h").write_text(base_header_text(kind), encoding="utf-8")


def base_header_text(kind: str, first: tuple[str, ...] = ()) -> str:
    """The base header of a kind of unit. For ``main.cpp`` (``cxx``), torch's pybind11 glue
    (``GLUE``) comes last, inside a region compiled at ``-O1`` when the unit optimises for
    speed without AddressSanitizer: the casters, ``cpp_function``'s dispatcher and the module
    machinery run once per call, not per element, and took about a quarter of an ``-O3``
    compile of a one-function module (4.75-5.48 -> 3.64-3.80 s of CPU, light layout, header
    precompiled). The candidate's own code, and every header before the region, keep the unit's
    level: ``first`` names the standard and ATen headers the glue would otherwise bring in
    inside the region (``std::map``, ``std::thread``...), so that a kernel using them gets
    them at its own level."""
    if kind != "cxx":
        headers = (*BASE_EXTRA[kind], *BASE_COMMON)
        return "#pragma once\n" + "".join(f"#include <{h}>\n" for h in headers)
    lines = ["#pragma once"]
    lines += [f"#include <{h}>" for h in dict.fromkeys((*BASE_COMMON, *first))]
    lines += [
        f"#if {GLUE_AT_O1}",
        "#pragma GCC push_options",
        '#pragma GCC optimize("O1")',
        "#endif",
    ]
    lines += [f"#include <{h}>" for h in GLUE]
    lines += [f"#if {GLUE_AT_O1}", "#pragma GCC pop_options", "#endif"]
    return "\n".join(lines) + "\n"


def _glue_first(glue_only: set[str], includable: Callable[[str], str | None]) -> tuple[str, ...]:
    """Of the files (paths) only the glue brings into the base header, the C++ library's (the
    compiler's ``c++`` folder: ``<map>``, ``<thread>``, its ``<math.h>``) and ATen/c10's, as
    includable spellings; in no particular order (each is self-contained)."""
    found = []
    for path in sorted(glue_only):
        name = includable(path)
        if name is not None and ("/c++/" in path or name.startswith(("ATen/", "c10/"))):
            found.append(name)
    return tuple(dict.fromkeys(found))


def _find(toolchain: Toolchain, spelling: str) -> Path:
    for root in toolchain.system_includes:
        candidate = Path(root) / spelling
        if candidate.exists():
            return candidate
    raise ValueError(f"{spelling} not found in torch's include paths")


def _preprocess(
    toolchain: Toolchain,
    text: str,
    folder: Path,
    extra: list[str],
    timeout: float,
    *,
    defines: bool = False,
    nvcc: bool = False,
) -> str:
    """``text`` preprocessed by g++, or by nvcc's host pass (CUDA's macros and headers)."""
    cuda = nvcc and toolchain.nvcc is not None
    source = folder / ("umbrella.cu" if cuda else "umbrella.cpp")
    source.write_text(text, encoding="utf-8")
    includes = [arg for inc in toolchain.system_includes for arg in ("-isystem", inc)]
    flags = [CXX_STD, *toolchain.defines, EXTENSION_DEFINE, *extra, *includes]
    if cuda:
        assert toolchain.nvcc is not None
        dd = ["-Xcompiler", "-dD"] if defines else []
        command = [toolchain.nvcc, "-E", *dd, *flags, str(source)]
    else:
        command = [toolchain.cxx, "-E", *(["-dD"] if defines else []), "-x", "c++", *flags]
        command.append(str(source))
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    source.unlink()
    if proc.returncode != 0:
        raise ValueError(f"preprocessing failed: {proc.stderr[-2000:]}")
    return proc.stdout


def _compiler_dirs(toolchain: Toolchain) -> list[str]:
    """The compiler's built-in include directories (``g++ -E -v``), plus nvcc's own."""
    proc = subprocess.run(
        [toolchain.cxx, "-E", "-v", "-x", "c++", os.devnull],
        capture_output=True,
        text=True,
        check=False,
    )
    dirs: list[str] = []
    inside = False
    for line in proc.stderr.splitlines():
        if line.startswith("#include <...> search starts here"):
            inside = True
        elif line.startswith("End of search list"):
            inside = False
        elif inside:
            dirs.append(os.path.normpath(line.strip()))
    if toolchain.cuda_home:
        target = Path(toolchain.cuda_home) / "targets" / "x86_64-linux" / "include"
        dirs += [str(target), str(target / "cccl")]
    return dirs


def _spelling(path: str, roots: list[str]) -> str | None:
    """``path`` as an ``#include <...>`` spelling under the longest matching root."""
    norm = os.path.normpath(path)
    best: str | None = None
    for root in roots:
        prefix = os.path.normpath(root) + os.sep
        if norm.startswith(prefix):
            rel = norm[len(prefix) :]
            if best is None or len(rel) < len(best):
                best = rel
    return best


def _includable(path: str, parents: dict[str, str], roots: list[str]) -> str | None:
    """The nearest file on ``path``'s include chain that can be included on its own."""
    current: str | None = path
    while current:
        spelling = _spelling(current, roots)
        if (
            spelling is not None
            and not NOT_INCLUDABLE.search(spelling)
            and not _inside_python_h(current)
        ):
            return spelling
        current = parents.get(current)
    return None


def _inside_python_h(path: str) -> bool:
    """A header of Python's own besides ``Python.h``: none of them stands alone (``object.h``
    needs ``Py_buffer`` from ``pybuffer.h``, which only ``Python.h`` includes first)."""
    folder = os.path.normpath(sysconfig.get_paths()["include"])
    norm = os.path.normpath(path)
    return os.path.dirname(norm) == folder and os.path.basename(norm) != "Python.h"
