"""Export: a verified solution becomes an installable package (``cuda-agent export``).

The package builds its kernels at install time with torch's extension builder, registers the
forward as a ``torch.library`` custom operator with a fake implementation (so
``torch.compile(fullgraph=True)`` traces through it), and carries ``VERIFIED``: what was
verified, on which sizes and device. This package uses the evaluator; the evaluator never
imports it.
"""

from cuda_agent.export.exporter import (
    ExportItem,
    ExportOutcome,
    check_target,
    export_many,
    export_solution,
    package_name,
    resolve_solution_path,
)
from cuda_agent.export.sources import ExportError

__all__ = [
    "ExportError",
    "ExportItem",
    "ExportOutcome",
    "check_target",
    "export_many",
    "export_solution",
    "package_name",
    "resolve_solution_path",
]
