"""Run untrusted processes in a sandbox: the agent's shell, evaluation workers, compilers.

The mode comes from ``isolation.py``, strongest first:

* ``bwrap``: the whole file system read-only except the workdir and a private ``/tmp``;
  chosen paths hidden behind an empty tmpfs; no network; own PID namespace and session;
  killed with its parent; GPU device files only when the policy asks for them;
* ``confine``: no namespaces needed (GPU machines): the process confines itself through the
  launcher (``confine.py``) before the command runs: Landlock (writes only in the workdir,
  the tmpdir and ``bind_rw``; hidden paths unreadable), the network cut (own network
  namespace as root, else Landlock's TCP rules or a seccomp filter), and for evaluation
  workers of a root harness a dedicated unprivileged user that owns only its own folders;
* ``none``: rlimits and a process group only, refused unless the caller allows it.

In every mode the child applies its own rlimits (CPU time, address space unless CUDA needs it
lifted, file size, open files, no core) and starts in a new session, so the caller can kill
the whole group at its deadline. No ``preexec_fn``: forking a process with threads and running
Python code in the child can deadlock (the bench did, on logging's and the import lock).
The harness's secret (``core/secret.py``: the key that signs caches) is hidden in every mode.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import package_root
from cuda_agent.core.secret import secret_dir
from cuda_agent.workspace.confine import LANDLOCKED_ENV, ConfinePlan
from cuda_agent.workspace.isolation import (
    GPU_DEVICES,
    NONE,
    IsolationUnavailable,
    bwrap_usable,
    capabilities,
    describe,
    launcher,
    refuse_message,
    requested_mode,
    sandbox_uid,
    unsandboxed_allowed,
)

__all__ = ["Sandbox", "SandboxPolicy", "bwrap_usable", "worker_isolation"]

LAUNCHER_DIR = ".bin"
_slots = itertools.count()
_slots_lock = threading.Lock()


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
    drop_user: bool = False  # as root, run as a dedicated unprivileged user (confine mode)


def _python_roots() -> list[str]:
    """Where this Python, its packages and cuda_agent live (the sandbox must see them)."""
    roots = {sys.prefix, sys.base_prefix, str(package_root().parent)}
    roots.update(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return sorted(r for r in roots if os.path.isdir(r))


class Sandbox:
    """Builds the command line, environment and confinement plan for sandboxed commands.

    ``use_bwrap``: True/False forces bubblewrap on/off (None: the isolation mode decides).
    ``allow_unsandboxed``: accept ``none`` when nothing else is available (else
    ``IsolationUnavailable``).
    """

    def __init__(
        self,
        policy: SandboxPolicy,
        use_bwrap: bool | None = None,
        allow_unsandboxed: bool = False,
    ) -> None:
        self.policy = policy
        self.mode, self.plan, self.isolation = _choose(policy, use_bwrap, allow_unsandboxed)
        policy.tmpdir.mkdir(parents=True, exist_ok=True)
        _write_launcher(policy.tmpdir / LAUNCHER_DIR)
        for path in (policy.workdir, policy.tmpdir, *policy.bind_rw):
            self.grant(path)

    @property
    def uid(self) -> int | None:
        return self.plan.uid

    def grant(self, path: Path) -> None:
        """Give the sandbox user ``path`` (recursively) when the plan drops to one."""
        if self.plan.uid is None or not path.exists():
            return
        uid, gid = self.plan.uid, self.plan.gid if self.plan.gid is not None else self.plan.uid
        os.chown(path, uid, gid)
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)

    def environment(self) -> dict[str, str]:
        tmp = "/tmp" if self.mode == "bwrap" else str(self.policy.tmpdir)
        if self.policy.inherit_env:
            return {**os.environ, "TMPDIR": tmp, **self.policy.extra_env}
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
        """The full command line: bubblewrap (if that is the mode) around the launcher."""
        confined = launcher(self.plan, argv)
        if self.mode != "bwrap":
            return confined
        p = self.policy
        dev = ["--dev-bind", "/dev", "/dev"] if p.gpu else ["--dev", "/dev"]
        args = ["bwrap", "--ro-bind", "/", "/", *dev, "--proc", "/proc"]
        args += ["--bind", str(p.tmpdir), "/tmp"]
        for root in _python_roots():  # visible again if they live under the replaced /tmp
            args += ["--ro-bind", root, root]
        for path in p.bind_ro:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        for hidden in (*p.hidden, secret_dir()):
            if hidden.exists():
                args += ["--tmpfs", str(hidden)]
        for path in (*p.bind_rw, p.workdir):
            args += ["--bind", str(path), str(path)]
        if not p.network:
            args.append("--unshare-net")
        args += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"]
        args += ["--chdir", str(p.workdir)]
        if not p.inherit_env:
            args.append("--clearenv")
            for key, value in self.environment().items():
                args += ["--setenv", key, value]
        return [*args, *confined]

    def popen(self, argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(  # type: ignore[call-overload]
            self.wrap(argv),
            cwd=self.policy.workdir,
            env=self.environment(),
            start_new_session=True,
            **kwargs,
        )


def worker_isolation(gpu: bool, allow_unsandboxed: bool = False) -> str:
    """The isolation an evaluation worker would get here (raises ``IsolationUnavailable`` if
    that is none and it was not allowed). Pools and commands call it before any work starts."""
    probe = SandboxPolicy(workdir=Path("/nonexistent"), tmpdir=Path("/nonexistent"), gpu=gpu)
    probe = SandboxPolicy(**{**probe.__dict__, "drop_user": True})
    _mode, _plan, name = _choose(probe, None, allow_unsandboxed)
    return name


def _rlimits(p: SandboxPolicy) -> dict[str, int]:
    return {
        "cpu": p.cpu_seconds,
        "as": p.address_space_bytes if p.address_space_bytes is not None else -1,
        "fsize": p.file_size_bytes,
        "nofile": p.open_files,
        "core": 0,
    }


def _choose(
    policy: SandboxPolicy, use_bwrap: bool | None, allow_unsandboxed: bool
) -> tuple[str, ConfinePlan, str]:
    """(mode, the launcher's plan, the reported isolation name)."""
    requested = requested_mode()
    allowed = unsandboxed_allowed(allow_unsandboxed)
    limits = ConfinePlan(rlimits=_rlimits(policy))
    if requested == NONE:
        if not allowed:
            raise IsolationUnavailable(
                f"CUDA_AGENT_ISOLATION=none needs --allow-unsandboxed: {refuse_message()}"
            )
        return NONE, limits, NONE
    if requested == "bwrap" and not bwrap_usable():
        raise CudaAgentError("CUDA_AGENT_ISOLATION=bwrap, but bubblewrap is not usable here")
    want_bwrap = requested == "bwrap" or (requested == "auto" and use_bwrap is not False)
    if use_bwrap is True or (want_bwrap and use_bwrap is None and bwrap_usable()):
        return "bwrap", limits, "bwrap"
    plan, mechanisms = confine_plan(policy)
    name = describe(mechanisms)
    if name == NONE:
        if not allowed:
            raise IsolationUnavailable(refuse_message())
        return NONE, limits, NONE
    return "confine", plan, name


def confine_plan(policy: SandboxPolicy) -> tuple[ConfinePlan, list[str]]:
    """The strongest namespace-free plan for ``policy`` here, and its mechanisms."""
    caps = capabilities()
    plan = ConfinePlan(rlimits=_rlimits(policy))
    mechanisms: list[str] = []
    if policy.drop_user and caps.user_ok and (caps.user_gpu_ok or not policy.gpu):
        with _slots_lock:
            slot = next(_slots)
        plan.uid = plan.gid = sandbox_uid(slot)
        mechanisms.append("user")
    nested = os.environ.get(LANDLOCKED_ENV) == "1"  # the outer layer already confines files
    if caps.landlock_abi >= 1 and (caps.landlock_gpu_ok or not policy.gpu) and not nested:
        plan.landlock = True
        plan.writable = [str(p) for p in (policy.workdir, policy.tmpdir, *policy.bind_rw)]
        plan.devices = list(GPU_DEVICES) if policy.gpu else ["/dev"]
        plan.hidden = [str(p) for p in (*policy.hidden, secret_dir())]
        mechanisms.append("landlock")
    if not policy.network:
        if caps.netns:
            plan.netns = True
            mechanisms.append("netns")
        else:  # no namespace: refuse IP sockets, and TCP again through Landlock where it can
            if plan.landlock and caps.landlock_abi >= 4:
                plan.landlock_net = True
                mechanisms.append("landlock-net")
            plan.seccomp_net = True
            mechanisms.append("seccomp")
    return plan, mechanisms
