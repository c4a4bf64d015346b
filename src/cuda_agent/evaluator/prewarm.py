"""Warm a process up for evaluations before any of its threads starts one.

``prewarm(backend)`` does in the calling thread what jobs would otherwise do first and
concurrently: import the evaluation and build code (torch's ``cpp_extension`` pulls in
setuptools and logging), find the toolchain, probe the isolation. Importing for the first
time in several threads while others start processes is how a bench deadlocked. The local
pool and the evaluation service call it before they start serving. What it does not do: start
a worker or build anything.
"""

from __future__ import annotations

import contextlib


def prewarm(backend: str, allow_unsandboxed: bool = False) -> str:
    """Returns the isolation workers will get (raises ``IsolationUnavailable`` if none and not
    allowed)."""
    import cuda_agent.evaluator.pipeline  # noqa: F401
    from cuda_agent.evaluator.builder.toolchain import ToolchainError, discover
    from cuda_agent.workspace.sandbox import worker_isolation

    with contextlib.suppress(ToolchainError):  # reported per build, as a verdict
        discover(backend)
    return worker_isolation(backend == "cuda", allow_unsandboxed)
