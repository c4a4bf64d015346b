"""Run untrusted processes in a sandbox: the agent's shell, and the evaluation worker.

With bubblewrap (``bwrap``) usable: the whole file system read-only, except the workdir and a
private ``/tmp``; chosen paths hidden behind an empty tmpfs (the evaluator's cache, for the
agent); no network (own network namespace); own PID namespace and session; killed with its
parent; GPU device files only when the policy asks for them. Without it: the process runs in
its own process group with the same limits, a warning is logged once, and nothing confines its
file-system or network access. In both modes CPU time, address space (unless the policy lifts
it, as CUDA needs), file size and open files are limited with rlimits, and the caller kills
the whole process group at its deadline.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

_warned_fallback = False
LAUNCHER_DIR = ".bin"


def _write_launcher(folder: Path) -> None:
    """A ``cuda-agent`` script that runs this Python's ``-m cuda_agent`` (found on ``PATH``
    after the interpreter's own bin folder, where an installed console script would be)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "cuda-agent"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m cuda_agent "$@"\n')
    script.chmod(0o755)


@dataclass(frozen=True)
class SandboxPolicy:
    workdir: Path
    tmpdir: Path
    network: bool = False
    cpu_seconds: int = 900
    address_space_bytes: int | None = 32 << 30  # None: unlimited (CUDA reserves huge ranges)
    file_size_bytes: int = 2 << 30
    open_files: int = 1024
    hidden: tuple[Path, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    bind_rw: tuple[Path, ...] = ()
    bind_ro: tuple[Path, ...] = ()
    gpu: bool = False  # expose /dev (GPU device files) instead of a minimal /dev
    inherit_env: bool = False  # keep the caller's environment instead of a clean one


def _python_roots() -> list[str]:
    """Where this Python, its packages and cuda_agent live (the sandbox must see them)."""
    import cuda_agent

    roots = {sys.prefix, sys.base_prefix, str(Path(cuda_agent.__file__).resolve().parents[1])}
    roots.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return sorted(r for r in roots if os.path.isdir(r))


@functools.lru_cache(maxsize=1)
def bwrap_usable() -> bool:
    """True when ``bwrap`` exists and can create the namespaces we ask for here."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    probe = subprocess.run(
        [
            binary,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-net",
            "--unshare-pid",
            "--die-with-parent",
            "true",
        ],
        capture_output=True,
        check=False,
        timeout=30,
    )
    return probe.returncode == 0


class Sandbox:
    """Builds the command line, environment and limits for sandboxed commands."""

    def __init__(self, policy: SandboxPolicy, use_bwrap: bool | None = None) -> None:
        self.policy = policy
        self.mode = "bwrap" if (bwrap_usable() if use_bwrap is None else use_bwrap) else "rlimits"
        policy.tmpdir.mkdir(parents=True, exist_ok=True)
        _write_launcher(policy.tmpdir / LAUNCHER_DIR)
        if self.mode == "rlimits":
            global _warned_fallback
            if not _warned_fallback:
                log.warning(
                    "bubblewrap is not usable here: agent commands run with rlimits and "
                    "their own process group only (no file-system or network isolation)"
                )
                _warned_fallback = True

    def environment(self) -> dict[str, str]:
        if self.policy.inherit_env:
            return {**os.environ, **self.policy.extra_env}
        tmp = "/tmp" if self.mode == "bwrap" else str(self.policy.tmpdir)
        bin_dirs = [
            str(Path(sys.executable).parent),
            f"{tmp}/{LAUNCHER_DIR}",  # `cuda-agent` even where the package is not installed
            "/usr/local/bin",
            "/usr/bin",
            "/bin",
        ]
        env = {
            "PATH": os.pathsep.join(dict.fromkeys(bin_dirs)),
            "HOME": str(self.policy.workdir),
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        for key in ("CUDA_HOME", "PYTHONPATH", "CUDA_AGENT_CACHE"):
            if key in os.environ:
                env[key] = os.environ[key]
        env.update(self.policy.extra_env)
        return env

    def wrap(self, argv: list[str]) -> list[str]:
        if self.mode != "bwrap":
            return argv
        p = self.policy
        dev = ["--dev-bind", "/dev", "/dev"] if p.gpu else ["--dev", "/dev"]
        args = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            *dev,
            "--proc",
            "/proc",
            "--bind",
            str(p.tmpdir),
            "/tmp",
        ]
        for root in _python_roots():  # visible again if they live under the replaced /tmp
            args += ["--ro-bind", root, root]
        for path in p.bind_ro:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for hidden in p.hidden:
            if hidden.exists():
                args += ["--tmpfs", str(hidden)]
        for path in (*p.bind_rw, p.workdir):
            args += ["--bind", str(path), str(path)]
        if not p.network:
            args.append("--unshare-net")
        args += [
            "--unshare-pid",
            "--unshare-ipc",
            "--die-with-parent",
            "--new-session",
            "--chdir",
            str(p.workdir),
        ]
        if not p.inherit_env:
            args.append("--clearenv")
            for key, value in self.environment().items():
                args += ["--setenv", key, value]
        return [*args, *argv]

    def limits(self) -> None:
        """``preexec_fn``: rlimits and a new session (process group) for the command."""
        p = self.policy
        os.setsid()
        for limit, value in (
            (resource.RLIMIT_CPU, p.cpu_seconds),
            (resource.RLIMIT_AS, p.address_space_bytes or resource.RLIM_INFINITY),
            (resource.RLIMIT_FSIZE, p.file_size_bytes),
            (resource.RLIMIT_NOFILE, p.open_files),
            (resource.RLIMIT_CORE, 0),
        ):
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(limit, (value, value))

    def popen(self, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # type: ignore[call-overload]
            self.wrap(argv),
            cwd=self.policy.workdir,
            env=self.environment(),
            preexec_fn=self.limits,
            **kwargs,
        )
