"""Write an exported package's project: ``pyproject.toml``, ``setup.py``, the package, sources.

Layout (one problem exported as package ``relu_k``; a bench export has one sub-package per
problem, ``PKG/<problem>/``, sharing ``PKG/_runtime.py``)::

    pyproject.toml      setuptools + torch as build requirements (present: --no-build-isolation)
    setup.py            torch's BuildExtension: CppExtension / CUDAExtension per extension
    README.md           how to install and use it, what was verified
    csrc/<module>/<extension>/...   the extension sources, compiled at install time
    relu_k/__init__.py  ModelNew, VERIFIED, set_unverified_policy, reference
    relu_k/_runtime.py  the runtime (``export/runtime.py``, copied verbatim)
    relu_k/_solution.py the solution's entry file, verbatim
    relu_k/reference.py the problem, verbatim
    relu_k/_verified.py VERIFIED
    relu_k/kernels/...  a Triton workdir's kernel modules (``kernels/*.py``), as Python

A Triton solution has no extension to compile (its kernels compile at their first launch);
its package depends on ``triton``.

Nothing here evaluates or decides; ``exporter.py`` does, then calls ``write_project``.
"""

from __future__ import annotations

import json
import pprint
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.types import Problem, Solution
from cuda_agent.export.sources import ExtensionSource, python_kernel_files

RUNTIME_FILE = Path(__file__).with_name("runtime.py")
CXX_FLAGS = ("-O3", "-std=c++20", "-g0")  # -g0: no debug info (Python adds -g)
NVCC_FLAGS = ("-O3", "-std=c++20")


@dataclass(frozen=True)
class ProblemExport:
    """One problem's part of a package: where it goes and what it holds."""

    module: str  # dotted import path: the package itself, or PACKAGE.<problem>
    op: str  # the operator's name in the package's namespace
    problem: Problem
    solution: Solution
    extensions: list[ExtensionSource]
    verified: dict[str, Any]


def write_project(
    out: Path, package: str, items: list[ProblemExport], arch_flags: list[str]
) -> list[Path]:
    """Write the project for ``items`` into ``out`` (an empty or new folder); the files."""
    written: list[Path] = []

    def put(rel: str, text: str) -> None:
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)

    put(f"{package}/_runtime.py", RUNTIME_FILE.read_text(encoding="utf-8"))
    if len(items) != 1 or items[0].module != package:
        put(f"{package}/__init__.py", _package_init(package, items))
    for item in items:
        folder = item.module.replace(".", "/")
        put(f"{folder}/__init__.py", _module_init(package, item))
        put(f"{folder}/_solution.py", item.solution.files[item.solution.entry_file])
        put(f"{folder}/reference.py", item.problem.source)
        put(f"{folder}/_verified.py", _verified_py(item))
        for ext in item.extensions:
            for rel, text in ext.files.items():
                put(f"{_csrc(item, ext)}/{rel}", text)
        for rel, text in _kernel_modules(item).items():
            put(f"{folder}/{rel}", text)
    put("setup.py", _setup_py(package, items, arch_flags))
    put("pyproject.toml", _pyproject(package, items))
    put("README.md", _readme(package, items))
    return written


def _csrc(item: ProblemExport, ext: ExtensionSource) -> str:
    return f"csrc/{item.module.replace('.', '_')}/{ext.name}"


def _extension_table(items: list[ProblemExport]) -> list[dict[str, Any]]:
    table = []
    for item in items:
        for ext in item.extensions:
            folder = _csrc(item, ext)
            table.append(
                {
                    "name": f"{item.module}.{ext.name}",
                    "sources": [f"{folder}/{src}" for src in ext.sources],
                    "include_dir": folder,
                    "cuda": ext.cuda,
                    "cxx": _merge(CXX_FLAGS, ext.cflags),
                    "nvcc": _merge(NVCC_FLAGS, ext.cuda_cflags),
                    "ldflags": list(ext.ldflags),
                }
            )
    return table


def _merge(base: tuple[str, ...], extra: tuple[str, ...]) -> list[str]:
    return [*base, *(flag for flag in extra if flag not in base)]


def _kernel_modules(item: ProblemExport) -> dict[str, str]:
    """A workdir's Python kernel modules, with an ``__init__.py`` in every folder that lacks one
    (so setuptools installs them as packages)."""
    files = python_kernel_files(item.solution)
    for rel in list(files):
        parent = Path(rel).parent
        while parent.parts:
            files.setdefault(f"{parent.as_posix()}/__init__.py", "")
            parent = parent.parent
    return files


def _kernel_packages(item: ProblemExport) -> set[str]:
    folders = {Path(rel).parent for rel in _kernel_modules(item)}
    return {".".join((item.module, *folder.parts)) for folder in folders}


def _uses_triton(items: list[ProblemExport]) -> bool:
    return any("triton" in str(item.verified.get("language") or "") for item in items)


def _setup_py(package: str, items: list[ProblemExport], arch_flags: list[str]) -> str:
    kernel_packages = {name for item in items for name in _kernel_packages(item)}
    packages = sorted({package, *(item.module for item in items), *kernel_packages})
    table = pprint.pformat(_extension_table(items), indent=1, width=96, sort_dicts=False)
    return SETUP_PY.format(
        package=package,
        arch_flags=repr(arch_flags),
        extensions=table,
        packages=repr(packages),
    )


def _pyproject(package: str, items: list[ProblemExport]) -> str:
    ids = ", ".join(item.problem.id for item in items)
    dependencies = ["torch", "triton"] if _uses_triton(items) else ["torch"]
    return PYPROJECT.format(
        name=package.replace("_", "-"),
        description=json.dumps(f"Verified kernels exported by cuda-agent ({ids})"),
        dependencies=json.dumps(dependencies),
    )


def _module_init(package: str, item: ProblemExport) -> str:
    modules = {ext.name: f"{item.module}.{ext.name}" for ext in item.extensions}
    namespace = package
    verified = item.verified
    outside = (
        "a warning, once per new size (every other size tried passed)"
        if verified.get("generalizes")
        else "UnverifiedCallError, naming the verified sizes"
    )
    return MODULE_INIT.format(
        module=item.module,
        problem=item.problem.id,
        kind=item.solution.kind.value,
        solution_hash=item.solution.content_hash[:12],
        namespace=namespace,
        op=item.op,
        outside=outside,
        env=f"{namespace.upper()}_UNVERIFIED",
        package=package,
        modules=repr(modules),
    )


def _package_init(package: str, items: list[ProblemExport]) -> str:
    problems = {item.problem.id: item.module for item in items}
    return PACKAGE_INIT.format(
        package=package,
        problems=pprint.pformat(problems, indent=1, width=96),
        env=f"{package.upper()}_UNVERIFIED",
    )


def _verified_py(item: ProblemExport) -> str:
    body = pprint.pformat(item.verified, indent=1, width=96, sort_dicts=False)
    doc = f'"""What {item.module} was verified on (written by cuda-agent export)."""'
    return f"{doc}\n\nVERIFIED = {body}\n"


def _readme(package: str, items: list[ProblemExport]) -> str:
    rows = []
    for item in items:
        v = item.verified
        passed = sum(1 for s in v["shapes"] if s["verdict"] == "pass")
        failed = [s["label"] for s in v["shapes"] if s["verdict"] == "fail"]
        speedup = v.get("speedup_eager")
        rows.append(
            f"| `{item.module}` | {item.problem.id} | {v.get('language') or '-'} | {v['backend']} "
            f"({v['device'].get('device', '?')}) | {passed} | {', '.join(failed) or '-'} | "
            f"{'-' if speedup is None else f'{speedup:.2f}x'} |"
        )
    first = items[0].module
    return README.format(
        package=package,
        first=first,
        table="\n".join(rows),
        env=f"{package.upper()}_UNVERIFIED",
    )


SETUP_PY = '''"""Build script of {package} (written by cuda-agent export).

Compiles the verified kernels with torch's extension builder; nothing is downloaded:
    pip install --no-build-isolation .
CUDA kernels are compiled for the GPU architecture they were verified on; set
TORCH_CUDA_ARCH_LIST to build for others (calls on another GPU then follow the package's
unverified policy).
"""

import os
from pathlib import Path

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

HERE = Path(__file__).resolve().parent
VERIFIED_ARCH_FLAGS = {arch_flags}
EXTENSIONS = {extensions}


def extension(spec):
    include_dirs = [str(HERE / spec["include_dir"])]
    if not spec["cuda"]:
        return CppExtension(
            spec["name"],
            spec["sources"],
            include_dirs=include_dirs,
            extra_compile_args=spec["cxx"],
            extra_link_args=spec["ldflags"],
        )
    nvcc = list(spec["nvcc"])
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        nvcc += VERIFIED_ARCH_FLAGS
    return CUDAExtension(
        spec["name"],
        spec["sources"],
        include_dirs=include_dirs,
        extra_compile_args={{"cxx": spec["cxx"], "nvcc": nvcc}},
        extra_link_args=spec["ldflags"],
    )


setup(
    packages={packages},
    ext_modules=[extension(spec) for spec in EXTENSIONS],
    cmdclass={{"build_ext": BuildExtension}},
    zip_safe=False,
)
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=64", "torch"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = {description}
readme = "README.md"
requires-python = ">=3.10"
dependencies = {dependencies}
"""

MODULE_INIT = '''"""{module}: the verified kernels of problem {problem}.

Written by cuda-agent export from a {kind} solution (hash {solution_hash}). ``ModelNew``
takes the problem's ``Model`` constructor arguments and has its ``state_dict`` keys; its
forward is the custom operator ``torch.ops.{namespace}.{op}``, so
``torch.compile(model, fullgraph=True)`` traces through it.
``VERIFIED`` records what was verified. A call outside the verified sizes, or on a GPU of
another compute capability, by default: {outside}. Change that with
``set_unverified_policy("error" | "warn" | "allow")`` or the environment variable {env}.
"""

from pathlib import Path

from {package}._runtime import ExportedProblem, UnverifiedCallError, load_solution_class
from {module} import reference
from {module}._verified import VERIFIED

_exported = ExportedProblem(
    package=__name__,
    namespace="{namespace}",
    op="{op}",
    solution=load_solution_class(__name__, Path(__file__).parent, {modules}, VERIFIED),
    reference=reference.Model,
    verified=VERIFIED,
)
ModelNew = _exported.model_class
set_unverified_policy = _exported.set_policy

__all__ = ["VERIFIED", "ModelNew", "UnverifiedCallError", "reference", "set_unverified_policy"]
'''

PACKAGE_INIT = '''"""{package}: verified kernels, one module per problem (by cuda-agent export).

``PROBLEMS`` maps each problem id to its module; each module has ``ModelNew``, ``VERIFIED``,
``reference`` and ``set_unverified_policy``. The environment variable {env} sets the policy
for calls outside the verified sizes in every module (error, warn or allow).
"""

PROBLEMS = {problems}
'''

README = """# {package}

Verified kernels exported by `cuda-agent export`. Install (builds the kernels with torch's
extension builder; nothing is downloaded):

```bash
pip install --no-build-isolation .
```

| module | problem | language | verified on | sizes passed | sizes failed | speed-up vs eager |
|---|---|---|---|---:|---|---:|
{table}

Use:

```python
import torch
from {first} import ModelNew, VERIFIED, reference

model = ModelNew(*reference.get_init_inputs())      # same arguments as the problem's Model
model.load_state_dict(reference.Model(*reference.get_init_inputs()).state_dict())
compiled = torch.compile(model, fullgraph=True)     # the kernels are one custom operator
```

`VERIFIED` holds the problem and solution hashes, backend, device, policy, the sizes verified
and their verdicts, the speed-ups and the date. A call on sizes (or a GPU compute capability)
that were not verified raises `UnverifiedCallError` naming the verified sizes, unless every
other size tried passed (`VERIFIED["generalizes"]`), in which case it warns once; set
`{env}=error|warn|allow` or call `set_unverified_policy(...)` to choose. The kernels are
inference-only. Triton kernels compile at their first launch (the package depends on
`triton`); a Triton module verified on the cpu backend runs in Triton's interpreter
(importing it sets `TRITON_INTERPRET=1` unless already set).
"""
