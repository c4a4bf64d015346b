"""Exception types shared across the package.

Every error that reaches a user carries a one-line, precise message (``str(err)``); the CLI
prints that line and exits with status 2, never a traceback. Candidate failures during an
evaluation are *not* exceptions: they are verdicts recorded in an ``EvalResult``.
"""

from __future__ import annotations


class CudaAgentError(Exception):
    """Base class for errors caused by unusable input (bad problem, bad solution path...)."""


class ProblemError(CudaAgentError):
    """A problem file is missing, malformed or does not follow the KernelBench format."""


class SolutionError(CudaAgentError):
    """A solution path cannot be used (missing file, neither a .py file nor a workdir)."""


class ConfigError(CudaAgentError):
    """An option or setting has an unusable value."""
