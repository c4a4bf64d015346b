"""Export verified solutions as an installable package (``cuda-agent export``, ``--export-best``).

A solution is exported only when it evaluates correct here: ``export_solution`` evaluates it
with ``shapes`` (so the package knows which sizes were verified, and whether the kernels
generalize) and refuses otherwise; then ``project.py`` writes the project. ``export_many``
puts several problems' solutions into one package, one module per problem, reusing their
evaluations when those already checked shapes (a bench run with ``--export-best``).

Not here: the package's runtime (``runtime.py``) or its files (``project.py``).
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.core.types import EvalResult, Problem, Solution
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.export.project import ProblemExport, write_project
from cuda_agent.export.sources import ExportError, ExtensionSource, extension_sources
from cuda_agent.export.verified import verified_record

Progress = Callable[[str, str], None]
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
RESERVED = {"torch", "aten", "prim", "prims", "cuda_agent", "cuda_extension", "reference"}


@dataclass
class ExportItem:
    """A problem, its solution and (optionally) an evaluation of it that checked shapes."""

    problem: Problem
    solution: Solution
    result: EvalResult | None = None


@dataclass
class ExportOutcome:
    package: str
    out: Path
    modules: dict[str, str] = field(default_factory=dict)  # problem id -> module
    skipped: dict[str, str] = field(default_factory=dict)  # problem id -> why
    results: dict[str, EvalResult] = field(default_factory=dict)  # problem id -> evaluation


def package_name(text: str) -> str:
    """A Python package name made from ``text`` (a problem id, a folder name)."""
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", text).strip("_").lower() or "kernels"
    name = f"k_{name}" if name[0].isdigit() else name
    return f"{name}_" if keyword.iskeyword(name) else name


def check_name(name: str) -> str:
    if not NAME.match(name) or keyword.iskeyword(name):
        raise ExportError(f"--name {name!r}: not a Python identifier (letters, digits, _)")
    if name in RESERVED or name.startswith("_"):
        raise ExportError(f"--name {name!r}: reserved; choose another name")
    return name


def check_target(out: Path, name: str | None = None) -> str:
    """The package name for a project written to ``out``; an error if ``out`` is not usable."""
    _check_out(out)
    return check_name(name or package_name(out.name))


def export_solution(
    problem: Problem,
    solution: Solution,
    out: Path,
    opts: EvalOptions,
    name: str | None = None,
    progress: Progress | None = None,
) -> ExportOutcome:
    """Evaluate ``solution`` here and, if it is correct, write its package into ``out``."""
    package = check_name(name or package_name(problem.id))
    _check_out(out)
    extensions = extension_sources(solution, opts.backend)  # static: fails before evaluating
    result = evaluate_with_shapes(problem, solution, opts, progress)
    if not result.correct:
        raise ExportError(refusal(result))
    item = _problem_export(
        problem, solution, result, opts, module=package, op="forward", extensions=extensions
    )
    write_project(out, package, [item], arch_flags(opts.backend))
    return ExportOutcome(package, out, {problem.id: package}, {}, {problem.id: result})


def export_many(
    items: list[ExportItem],
    out: Path,
    package: str,
    opts: EvalOptions,
    progress: Progress | None = None,
) -> ExportOutcome:
    """One package with a module per problem; problems whose solution is not correct here are
    skipped (with the reason), and none correct at all is an error."""
    check_target(out, package)
    outcome = ExportOutcome(package, out)
    exports: list[ProblemExport] = []
    taken: set[str] = set()
    for item in items:
        pid = item.problem.id
        result = item.result
        if result is None or result.details.shapes is None:
            result = evaluate_with_shapes(item.problem, item.solution, opts, progress)
        outcome.results[pid] = result
        if not result.correct:
            outcome.skipped[pid] = refusal(result)
            continue
        module = _unique(package_name(pid), taken)
        try:
            exports.append(
                _problem_export(
                    item.problem,
                    item.solution,
                    result,
                    opts,
                    module=f"{package}.{module}",
                    op=module,
                )
            )
        except ExportError as err:
            outcome.skipped[pid] = str(err)
            continue
        outcome.modules[pid] = f"{package}.{module}"
    if not exports:
        reasons = "; ".join(f"{k}: {v}" for k, v in outcome.skipped.items())
        raise ExportError(f"no solution evaluates correct here, nothing exported ({reasons})")
    write_project(out, package, exports, arch_flags(opts.backend))
    return outcome


def evaluate_with_shapes(
    problem: Problem, solution: Solution, opts: EvalOptions, progress: Progress | None = None
) -> EvalResult:
    with_shapes = dataclasses.replace(opts, shapes=True)
    return evaluate(problem, solution, with_shapes.validate(), progress)


def refusal(result: EvalResult) -> str:
    """The one line that says why a solution is not exported."""
    error = result.error
    why = (
        ((error.message if error is not None else "") or "incorrect").strip().splitlines()[0][:300]
    )
    stage = error.stage if error is not None else "verify"
    return f"not exported: the solution does not evaluate correct here ({stage}: {why})"


def arch_flags(backend: str) -> list[str]:
    """The nvcc architecture flags the evaluation built with (none on the cpu backend)."""
    if backend != "cuda":
        return []
    from cuda_agent.evaluator.builder.toolchain import cuda_archs, gencode_flags

    return gencode_flags(cuda_archs())


def resolve_solution_path(path: Path) -> Path:
    """A solution file or workdir; an agent episode's folder stands for its ``best/``."""
    if path.is_dir() and not (path / "model_new.py").exists() and (path / "best").is_dir():
        return path / "best"
    return path


def _problem_export(
    problem: Problem,
    solution: Solution,
    result: EvalResult,
    opts: EvalOptions,
    *,
    module: str,
    op: str,
    extensions: list[ExtensionSource] | None = None,
) -> ProblemExport:
    if extensions is None:
        extensions = extension_sources(solution, opts.backend)
    verified = verified_record(
        problem,
        solution,
        result,
        opts,
        module=module,
        op=f"{module.split('.')[0]}::{op}",
        arch_flags=arch_flags(opts.backend),
    )
    return ProblemExport(module, op, problem, solution, extensions, verified)


def _check_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out}: exists and is not an empty folder; choose a new one")


def _unique(name: str, taken: set[str]) -> str:
    candidate, k = name, 2
    while candidate in taken:
        candidate, k = f"{name}_{k}", k + 1
    taken.add(candidate)
    return candidate
