"""The extensions of a solution as build-time sources: files, flags, the module name.

A KernelBench single file builds its extensions with ``load_inline`` at import; for a package,
each call becomes an extension compiled at install time, from exactly the texts the evaluator
compiles (``evaluator/builder/inline.py``: ``main.cpp`` with the generated bindings, ``cuda.cu``),
which needs every call's arguments to be compile-time constants (the static analysis resolves
them). A workdir's ``cuda_extension`` is the harness's binding files plus ``kernels/``.
Triton kernels are not compiled ahead: a Triton solution (``solutions.language``) has no
extension to build (its kernels compile at their first launch, as in the evaluator), and a
workdir's ``kernels/*.py`` modules are shipped as Python (``python_kernel_files``).

Not here: writing the project (``project.py``) or the runtime that loads these modules.
"""

from __future__ import annotations

from dataclasses import dataclass

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.types import Solution, SolutionKind
from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.builder.spec import SOURCE_SUFFIXES, ExtensionSpec, FlagError
from cuda_agent.solutions.language import detect_language
from cuda_agent.solutions.static import analyse
from cuda_agent.workspace.template_files import harness_binding_files

RESERVED_NAMES = {"reference", "_solution", "_verified", "_runtime"}


class ExportError(CudaAgentError):
    """A solution or problem that cannot be exported (one line for the CLI)."""


@dataclass(frozen=True)
class ExtensionSource:
    """One extension module: ``name`` is its import name inside the problem's module."""

    name: str
    files: dict[str, str]
    cuda: bool
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()  # the translation units among ``files``

    @classmethod
    def from_spec(cls, spec: ExtensionSpec) -> ExtensionSource:
        return cls(
            name=spec.name,
            files={f.name: f.text for f in spec.files},
            cuda=any(f.is_cuda for f in spec.files),
            cflags=spec.cflags,
            cuda_cflags=spec.cuda_cflags,
            ldflags=spec.ldflags,
            sources=tuple(f.name for f in spec.translation_units),
        )


def extension_sources(solution: Solution, backend: str) -> list[ExtensionSource]:
    """The extensions ``solution`` builds, as sources a package compiles at install time."""
    triton = "triton" in detect_language(solution)
    try:
        if solution.kind is SolutionKind.WORKDIR:
            kernels = {
                k: v
                for k, v in solution.files.items()
                if k.startswith("kernels/") and not k.endswith(".py")
            }
            specs = [workdir_spec(backend, kernels, harness_binding_files())]
            if triton and not _compiled_sources(kernels):
                specs = []  # Triton kernels only: nothing to build
        else:
            specs = _inline_specs(solution, backend, triton)
    except (FlagError, TypeError) as err:
        raise ExportError(f"{solution.path.name}: {err}") from None
    names = [spec.name for spec in specs]
    clashes = sorted({n for n in names if names.count(n) > 1 or n in RESERVED_NAMES})
    if clashes:
        raise ExportError(
            f"{solution.path.name}: extension name(s) {', '.join(clashes)} appear twice or are "
            "reserved by the package layout; rename them"
        )
    return [ExtensionSource.from_spec(spec) for spec in specs]


def python_kernel_files(solution: Solution) -> dict[str, str]:
    """A workdir's Python kernel modules (``kernels/**.py``: Triton), shipped as they are."""
    if solution.kind is not SolutionKind.WORKDIR:
        return {}
    files = solution.files.items()
    return {k: v for k, v in files if k.startswith("kernels/") and k.endswith(".py")}


def _compiled_sources(kernels: dict[str, str]) -> bool:
    return any(name.endswith(SOURCE_SUFFIXES) for name in kernels)


def _inline_specs(solution: Solution, backend: str, triton: bool) -> list[ExtensionSpec]:
    report = analyse(solution.files[solution.entry_file], solution.entry_file)
    if report.error:
        raise ExportError(report.error)
    if triton and not report.inline_calls and not report.unresolved_inline_calls:
        return []  # Triton kernels only: nothing to build
    if report.unresolved_inline_calls:
        raise ExportError(
            f"{solution.entry_file}: {report.unresolved_inline_calls} load_inline call(s) "
            "with arguments that are not compile-time constants; export needs every source "
            "and flag written out (literals, module constants, concatenations)"
        )
    if not report.inline_calls:
        raise ExportError(f"{solution.entry_file}: no load_inline call; nothing to compile")
    return [inline_spec(backend, **kwargs) for kwargs in report.inline_calls]
