"""Which isolation this machine offers for untrusted processes, chosen strongest first.

Modes, in order of preference:

* ``bwrap``: bubblewrap namespaces (read-only root, private ``/tmp``, no network, own PIDs);
  needs user namespaces, which GPU pods and clusters often switch off;
* confinement without namespaces (``confine.py``), any of: ``user`` (a dedicated unprivileged
  uid and gid when the harness runs as root), ``landlock`` (writes only beneath the process's own
  folders, the harness's secret unreadable; Linux >= 5.13), and for the network ``netns`` (root),
  ``landlock-net`` (Landlock ABI >= 4) or ``seccomp`` (no IPv4/IPv6 sockets); the reported name
  joins the mechanisms, e.g. ``user+landlock+netns``;
* ``none``: rlimits and a process group only. Refused unless the caller allows it
  (``--allow-unsandboxed``): candidates could then forge caches and reach the network.

``CUDA_AGENT_ISOLATION`` (``auto``, ``bwrap``, ``confine``, ``none``) forces a mode, for tests
and for machines where a probe misleads. Probes run once per process. What this module does
not do: apply anything (``confine.py`` and ``sandbox.py`` do).
"""

from __future__ import annotations

import functools
import glob
import logging
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.paths import cache_root, ensure_dir, package_root
from cuda_agent.workspace.confine import ConfinePlan, landlock_abi

log = logging.getLogger(__name__)

ISOLATION_ENV = "CUDA_AGENT_ISOLATION"
ALLOW_UNSANDBOXED_ENV = "CUDA_AGENT_ALLOW_UNSANDBOXED"
SANDBOX_UID_BASE = 61400
SANDBOX_UID_COUNT = 64
NONE = "none"
FS_MECHANISMS = ("bwrap", "user", "landlock")


class IsolationUnavailable(CudaAgentError):
    """No isolation is available here and running unsandboxed was not allowed."""


def unsandboxed_allowed(flag: bool = False) -> bool:
    return flag or os.environ.get(ALLOW_UNSANDBOXED_ENV, "") not in ("", "0")


def refuse_message() -> str:
    return (
        "no isolation is available here for candidate code (bubblewrap unusable, no Landlock, "
        "not root): candidates could write the harness's caches and reach the network. Pass "
        "--allow-unsandboxed (or set CUDA_AGENT_ALLOW_UNSANDBOXED=1) to run anyway; every "
        "result will then say isolation: none"
    )


def requested_mode() -> str:
    mode = os.environ.get(ISOLATION_ENV, "auto").strip() or "auto"
    if mode not in ("auto", "bwrap", "confine", NONE):
        raise CudaAgentError(f"{ISOLATION_ENV}={mode!r}: choose auto, bwrap, confine or none")
    return mode


@functools.lru_cache(maxsize=1)
def bwrap_usable() -> bool:
    """True when ``bwrap`` exists and can create the namespaces we ask for here."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    probe = subprocess.run(
        [
            *(binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"),
            *("--unshare-net", "--unshare-pid", "--die-with-parent", "true"),
        ],
        capture_output=True,
        check=False,
        timeout=30,
    )
    return probe.returncode == 0


@dataclass(frozen=True)
class Capabilities:
    """What the confinement launcher can do on this machine, for this process."""

    root: bool
    landlock_abi: int
    netns: bool
    user_ok: bool  # the dedicated user can run this Python and import our packages
    user_gpu_ok: bool  # ... and open the GPU device files
    landlock_gpu_ok: bool = True  # CUDA starts under Landlock with GPU_DEVICES writable


def launcher(plan: ConfinePlan, argv: list[str]) -> list[str]:
    """``argv`` run through the confinement launcher with ``plan``."""
    return [sys.executable, "-m", "cuda_agent.workspace.confine", plan.to_json(), "--", *argv]


def _probe(plan: ConfinePlan, code: str, *args: str) -> bool:
    env = dict(os.environ)
    src = str(package_root().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    try:
        proc = subprocess.run(
            launcher(plan, [sys.executable, "-c", code, *args]),
            capture_output=True,
            check=False,
            timeout=60,
            env=env,
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if proc.returncode != 0:
        log.debug("isolation probe failed: %s", proc.stderr.decode(errors="replace")[-500:])
    return proc.returncode == 0


USER_PROBE = (  # the dedicated user can load torch and us, and reach the cache
    "import importlib.util as u, os, sys\n"
    "for m in ('torch', 'cuda_agent'):\n"
    "    s = u.find_spec(m)\n"
    "    open(s.origin, 'rb').close()\n"
    "os.listdir(sys.argv[1])\n"
)
# Folders whose existing files a GPU worker may write under Landlock: the device files, and
# /proc, where the NVIDIA driver writes at cuInit (CUDA_ERROR_OPERATING_SYSTEM otherwise, seen
# on an H200 host; benchmarks/confine_gpu_probe.py). Ownership still applies to the sandbox user.
GPU_DEVICES = ("/dev", "/proc")
CUDA_PROBE = (  # cuInit succeeds (a machine without the driver has nothing to break)
    "import ctypes, sys\n"
    "try:\n"
    "    lib = ctypes.CDLL('libcuda.so.1')\n"
    "except OSError:\n"
    "    sys.exit(0)\n"
    "sys.exit(0 if lib.cuInit(0) == 0 else 1)\n"
)
GPU_PROBE = (
    "import glob, os\n"
    "for p in glob.glob('/dev/nvidia*'):\n"
    "    if not os.path.isdir(p):\n"
    "        os.close(os.open(p, os.O_RDWR))\n"
)


def capabilities() -> Capabilities:
    """What this machine offers, for the current cache folder (the sandbox user must reach it)."""
    return _capabilities(str(ensure_dir(cache_root())))


@functools.lru_cache(maxsize=8)
def _capabilities(cache: str) -> Capabilities:
    root = os.geteuid() == 0
    abi = landlock_abi()
    netns = root and _probe(ConfinePlan(netns=True), "pass")
    uid = sandbox_uid(0)
    user_ok = root and _probe(ConfinePlan(uid=uid, gid=uid), USER_PROBE, cache)
    if root and not user_ok:
        log.info("the sandbox user cannot read this Python, torch or %s: not used", cache)
    user_gpu_ok = user_ok and _probe(ConfinePlan(uid=uid, gid=uid), GPU_PROBE)
    landlock_gpu_ok = True
    if abi >= 1 and glob.glob("/dev/nvidia[0-9]*"):
        plan = ConfinePlan(landlock=True, devices=list(GPU_DEVICES))
        landlock_gpu_ok = _probe(plan, CUDA_PROBE)
        if not landlock_gpu_ok:
            log.warning("CUDA does not start under Landlock here: GPU workers run without it")
    return Capabilities(root, abi, netns, user_ok, user_gpu_ok, landlock_gpu_ok)


def sandbox_uid(slot: int) -> int:
    """The dedicated uid for slot ``slot``: a range of uids that no account uses."""
    free = [u for u in _uid_range() if u not in _taken_uids()]
    if not free:
        raise CudaAgentError("no free uid for the sandbox user (all are taken by accounts)")
    return free[slot % len(free)]


def _uid_range() -> range:
    base = int(os.environ.get("CUDA_AGENT_SANDBOX_UID", SANDBOX_UID_BASE))
    return range(base, base + SANDBOX_UID_COUNT)


@functools.lru_cache(maxsize=1)
def _taken_uids() -> frozenset[int]:
    try:
        return frozenset(p.pw_uid for p in pwd.getpwall())
    except OSError:
        return frozenset()


def describe(mechanisms: list[str]) -> str:
    """The reported isolation name: the mechanisms joined by ``+``, or ``none`` when none of
    them confines the file system."""
    if not any(m in FS_MECHANISMS for m in mechanisms):
        return NONE
    return "+".join(mechanisms)


def machine_summary() -> str:
    """One line on what this machine offers (``cuda-agent`` prints it in diagnostics)."""
    caps = capabilities()
    parts = [f"bwrap {'usable' if bwrap_usable() else 'unusable'}"]
    parts.append(f"landlock abi {caps.landlock_abi}" if caps.landlock_abi else "no landlock")
    parts.append("root" if caps.root else "not root")
    if caps.root:
        parts.append(f"netns {'yes' if caps.netns else 'no'}")
        parts.append(f"sandbox user {'yes' if caps.user_ok else 'no'}")
    return ", ".join(parts)
