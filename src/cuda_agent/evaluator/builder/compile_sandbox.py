"""The compile sandbox: compilers that read candidate sources run confined.

A source can make the compiler read any file it can open (``#include "/path"``, ``.incbin``)
and put its bytes into an error message or into the module. So compilers of candidate sources
run under the same isolation as candidate code (``workspace/sandbox.py``), with the build folder
writable and the harness's secret hidden; they keep the caller's environment and have no
network. Where no isolation is available they run as they are (the evaluation itself then
needs ``--allow-unsandboxed``). Each compiler process has the memory cap of a cpu worker
(``workspace/memory_cap.py``). Does not decide what to compile (``builder.py``).
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.core.paths import builds_dir, private_builds_dir
from cuda_agent.workspace.memory_cap import worker_memory_cap_bytes
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy

COMPILER_CPU_SECONDS = 3600


def confine_compiler(
    command: list[str], cwd: Path, extra_env: dict[str, str] | None = None
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment (ours plus ``extra_env``) that run ``command`` in
    ``cwd``, confined."""
    policy = SandboxPolicy(
        workdir=cwd,
        tmpdir=cwd / ".tmp",
        cpu_seconds=COMPILER_CPU_SECONDS,
        address_space_bytes=worker_memory_cap_bytes("cpu"),  # a compiler: no CUDA context
        file_size_bytes=8 << 30,
        open_files=4096,
        bind_ro=build_roots(),
        inherit_env=True,
        extra_env=dict(extra_env or {}),
    )
    sandbox = Sandbox(policy, allow_unsandboxed=True)
    return sandbox.wrap(command), sandbox.environment()


def build_roots() -> tuple[Path, ...]:
    """The folders whose headers a compile includes (precompiled headers, the light index's
    shadow headers): the shared cache's and, in a sandboxed worker, its private one, where
    those are built while the shared cache lacks them. Visible read-only, since bubblewrap
    replaces ``/tmp`` and either may live there."""
    private = private_builds_dir()
    return (builds_dir(),) if private is None else (builds_dir(), private)
