"""Confine the current process, then run a command: the launcher every untrusted process goes
through (``python -m cuda_agent.workspace.confine PLAN_JSON -- ARGV...``).

The process confines *itself* before it runs anything untrusted, so the parent never needs a
``preexec_fn`` (which is unsafe in a process with threads). In order:

1. rlimits (CPU seconds, address space, file size, open files, no core dumps);
2. a new network namespace (``unshare(CLONE_NEWNET)``, root only): no route out at all;
3. ``no_new_privs``, then a Landlock ruleset (Linux >= 5.13): writes only beneath the plan's
   writable folders; reads everywhere except the plan's hidden paths; with Landlock ABI >= 4
   no TCP connect/bind; with ABI >= 6 no signals to, and no abstract sockets of, processes
   outside the sandbox;
4. a seccomp filter that refuses IPv4/IPv6 sockets and io_uring (when the network is not
   otherwise cut);
5. the dedicated unprivileged user and group (root only): ``setgroups([])``, ``setresgid``,
   ``setresuid``; the process stays dumpable so that it can read its own ``/proc/self``.

Each step that the plan asks for and that fails raises ``ConfineError``: a half-confined process
never runs the command. What it does not do: choose the plan (``isolation.py`` does), or
namespaces other than the network's (bubblewrap's mode, ``sandbox.py``). Standard library only,
imported before anything heavy.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import platform
import resource
import struct
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Landlock (include/uapi/linux/landlock.h); the syscall numbers are the same on every arch.
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2
FS_TRUNCATE = 1 << 14  # ABI 3
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1
FS_READ = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
FS_WRITE_V1 = (
    FS_WRITE_FILE
    | FS_REMOVE_DIR
    | FS_REMOVE_FILE
    | FS_MAKE_CHAR
    | FS_MAKE_DIR
    | FS_MAKE_REG
    | FS_MAKE_SOCK
    | FS_MAKE_FIFO
    | FS_MAKE_BLOCK
    | FS_MAKE_SYM
)
# what a plan may grant on a device folder (/dev, /proc): write to existing files, nothing else
FS_DEVICE_WRITE = FS_WRITE_FILE | FS_TRUNCATE

# Set for processes started under a Landlock layer. A nested plan (a compiler confined by a
# worker that is itself confined) leaves Landlock out: the new layer would have to list the
# folders around the hidden paths, which the outer layer makes unreadable, and would then
# grant nothing (every exec failed with EACCES). The outer layer still applies. A process that
# clears the variable only makes its own nested launches fail.
LANDLOCKED_ENV = "CUDA_AGENT_LANDLOCKED"

CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
SANDBOX_USER_NAME = "cuda-agent-sandbox"  # what a confined process is told it is
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

RLIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
    "core": resource.RLIMIT_CORE,
}


class ConfineError(RuntimeError):
    """A confinement step the plan asked for could not be applied."""


@dataclass
class ConfinePlan:
    """What to apply. Paths are absolute. ``writable`` folders get full write access beneath
    them; ``devices`` folders get write access to existing files only (GPU device nodes);
    ``hidden`` paths cannot be read (nor written)."""

    rlimits: dict[str, int] = field(default_factory=dict)  # name -> value (-1: unlimited)
    netns: bool = False
    landlock: bool = False
    landlock_net: bool = False  # no TCP connect/bind (ABI >= 4)
    writable: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    seccomp_net: bool = False
    scoped: bool = True  # Landlock scoping (ABI >= 6): abstract unix sockets and signals
    uid: int | None = None
    gid: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ConfinePlan:
        return cls(**json.loads(text))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is unavailable."""
    try:
        libc = _libc()
        libc.syscall.restype = ctypes.c_long
        version = libc.syscall(
            ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION),
        )
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def apply(plan: ConfinePlan) -> list[str]:
    """Apply ``plan`` to this process; the mechanisms now in force, in order."""
    applied: list[str] = []
    _apply_rlimits(plan.rlimits)
    libc = _libc()
    if plan.netns:
        if libc.unshare(CLONE_NEWNET) != 0:
            raise ConfineError(f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}")
        applied.append("netns")
    needs_nnp = plan.landlock or plan.seccomp_net
    if needs_nnp and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise ConfineError(f"prctl(NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
    if plan.landlock:
        applied += _apply_landlock(libc, plan)
    if plan.seccomp_net:
        _apply_seccomp(libc)
        applied.append("seccomp")
    if plan.uid is not None:
        gid = plan.gid if plan.gid is not None else plan.uid
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(plan.uid, plan.uid, plan.uid)
        except OSError as err:
            raise ConfineError(f"switching to uid {plan.uid}: {err}") from None
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # its own /proc/self stays readable to it
        # the dedicated user has no passwd entry: getpass.getuser() (torch.compile's cache
        # folder, torch's extension build root) reads these first, and fails without them
        os.environ["USER"] = os.environ["LOGNAME"] = SANDBOX_USER_NAME
        applied.insert(0, "user")
    return applied


def _apply_rlimits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        target = resource.RLIM_INFINITY if value < 0 else value
        if name not in RLIMITS:
            raise ConfineError(f"unknown rlimit {name!r}")
        try:
            _soft, hard = resource.getrlimit(RLIMITS[name])
            capped = hard != resource.RLIM_INFINITY
            if capped and (target == resource.RLIM_INFINITY or target > hard):
                target = hard
            resource.setrlimit(RLIMITS[name], (target, target))
        except (ValueError, OSError) as err:
            raise ConfineError(f"setrlimit({name}={value}): {err}") from None


def _apply_landlock(libc: ctypes.CDLL, plan: ConfinePlan) -> list[str]:
    abi = landlock_abi()
    if abi < 1:
        raise ConfineError("Landlock is not available in this kernel")
    handled_fs = FS_READ | FS_WRITE_V1
    if abi >= 2:
        handled_fs |= FS_REFER
    if abi >= 3:
        handled_fs |= FS_TRUNCATE
    write_all = handled_fs & ~FS_READ
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if plan.landlock_net and abi >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 and plan.scoped else 0
    if abi >= 6:
        attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    elif abi >= 4:
        attr = struct.pack("QQ", handled_fs, handled_net)
    else:
        attr = struct.pack("Q", handled_fs)
    libc.syscall.restype = ctypes.c_long
    buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(
        ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), buf, ctypes.c_size_t(len(attr)), 0
    )
    if ruleset < 0:
        raise ConfineError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path in readable_roots(plan.hidden):
            _add_rule(libc, ruleset, path, FS_READ)
        for path in plan.devices:
            _add_rule(libc, ruleset, path, FS_READ | (FS_DEVICE_WRITE & handled_fs))
        for path in plan.writable:
            _add_rule(libc, ruleset, path, FS_READ | write_all)
        if libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ruleset, 0) != 0:
            raise ConfineError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    applied = ["landlock"]
    if handled_net:
        applied.append("landlock-net")
    return applied


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # a path that does not exist grants nothing
    try:
        if not os.path.isdir(path):
            access &= FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE  # file rights only
        attr = struct.pack("=Qi", access, fd)
        buf = ctypes.create_string_buffer(attr, len(attr))
        call = ctypes.c_long(SYS_LANDLOCK_ADD_RULE)
        if libc.syscall(call, ruleset, LANDLOCK_RULE_PATH_BENEATH, buf, 0) != 0:
            raise ConfineError(f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def readable_roots(hidden: list[str]) -> list[str]:
    """Paths whose subtrees together cover the whole file system except ``hidden``.

    Landlock only grants; to leave a few paths unreadable we grant every sibling along the way
    instead of ``/``: for ``/a/b/secret`` that is ``/``'s other entries, ``/a``'s other entries
    and ``/a/b``'s other entries. Symbolic links among them get no rule (one could lead back
    into a hidden path); what they point to is reached, and judged, by its real path. Entries
    created later next to a hidden path stay unreadable.
    """
    if not hidden:
        return ["/"]
    targets = [Path(os.path.abspath(h)) for h in hidden]
    roots: list[str] = []

    def expand(folder: Path) -> None:
        if folder.is_symlink():
            return  # a rule would follow it, maybe back into a hidden path; its target has its own
        inside = [t for t in targets if folder == t or folder in t.parents]
        if not inside:
            roots.append(str(folder))
            return
        if any(t == folder for t in inside):
            return  # hidden as a whole
        try:
            entries = sorted(os.listdir(folder))
        except OSError:
            return
        for entry in entries:
            expand(folder / entry)

    expand(Path("/"))
    return roots


# seccomp: refuse socket(AF_INET|AF_INET6, ...) and io_uring_setup (which can open sockets).
_AUDIT_ARCH = {"x86_64": (0xC000003E, 41, 425), "aarch64": (0xC00000B7, 198, 425)}
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_RET_K = 0x06
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_EACCES = 13


def _apply_seccomp(libc: ctypes.CDLL) -> None:
    machine = platform.machine()
    if machine not in _AUDIT_ARCH:
        raise ConfineError(f"no seccomp filter for {machine}")
    arch, nr_socket, nr_io_uring = _AUDIT_ARCH[machine]
    deny = _SECCOMP_RET_ERRNO | _EACCES
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_BPF_JEQ_K, 1, 0, arch),
        (_BPF_RET_K, 0, 0, deny),  # another ABI (i386 socketcall...): refuse every call
        (_BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_BPF_JEQ_K, 0, 1, nr_io_uring),
        (_BPF_RET_K, 0, 0, deny),
        (_BPF_JEQ_K, 1, 0, nr_socket),
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        (_BPF_LD_W_ABS, 0, 0, 16),  # seccomp_data.args[0] (low 32 bits): the domain
        (_BPF_JEQ_K, 2, 0, 2),  # AF_INET
        (_BPF_JEQ_K, 1, 0, 10),  # AF_INET6
        (_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
        (_BPF_RET_K, 0, 0, deny),
    ]
    raw = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in program)
    filt = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.cast(filt, ctypes.c_void_p))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise ConfineError(f"seccomp: {os.strerror(ctypes.get_errno())}")


def main(argv: list[str]) -> int:
    """``confine PLAN_JSON -- ARGV...``: apply the plan, then exec ARGV (exit 126 on failure)."""
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: python -m cuda_agent.workspace.confine PLAN_JSON -- ARGV...\n")
        return 2
    try:
        applied = apply(ConfinePlan.from_json(argv[0]))
    except (ConfineError, ValueError, TypeError, KeyError) as err:
        sys.stderr.write(f"cuda-agent confine: {err}\n")
        return 126
    if "landlock" in applied:
        os.environ[LANDLOCKED_ENV] = "1"  # a nested plan must not stack a second layer
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as err:
        sys.stderr.write(f"cuda-agent confine: cannot run {argv[2]}: {err}\n")
        return 127
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
