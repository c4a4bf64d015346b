"""The confinement launcher on this machine: each mechanism with a real process."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.workspace.confine import ConfinePlan, landlock_abi, readable_roots
from cuda_agent.workspace.isolation import capabilities, launcher, sandbox_uid

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock in this kernel")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def confined(plan: ConfinePlan, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        launcher(plan, [sys.executable, "-c", code]),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )


@needs_landlock
def test_landlock_allows_writes_only_beneath_writable_and_hides_paths(tmp_path: Path) -> None:
    work, outside, hidden = tmp_path / "work", tmp_path / "outside", tmp_path / "secret"
    for folder in (work, outside, hidden):
        folder.mkdir()
    (hidden / "key").write_text("s3cret")
    (outside / "readme").write_text("public")
    plan = ConfinePlan(landlock=True, writable=[str(work)], hidden=[str(hidden)])
    code = f"""
import pathlib
def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as err:
        return type(err).__name__
print("inside", attempt(lambda: pathlib.Path({str(work / "f")!r}).write_text("x")))
print("outside", attempt(lambda: pathlib.Path({str(outside / "f")!r}).write_text("x")))
print("tmp", attempt(lambda: pathlib.Path("/tmp/ca-confine-test-{os.getpid()}").write_text("x")))
print("read", attempt(lambda: pathlib.Path({str(outside / "readme")!r}).read_text()))
print("secret", attempt(lambda: pathlib.Path({str(hidden / "key")!r}).read_text()))
"""
    proc = confined(plan, code, work)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split() for line in proc.stdout.splitlines())
    assert lines == {
        "inside": "ok",
        "outside": "PermissionError",
        "tmp": "PermissionError",
        "read": "ok",
        "secret": "PermissionError",
    }
    assert not (outside / "f").exists()
    assert not Path(f"/tmp/ca-confine-test-{os.getpid()}").exists()


def _listener() -> tuple[socket.socket, int]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    return listener, listener.getsockname()[1]


CONNECT = """
import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
    print("connected")
except OSError as err:
    print("refused", type(err).__name__)
"""


@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(
            ConfinePlan(netns=True),
            id="netns",
            marks=pytest.mark.skipif(not capabilities().netns, reason="no network namespace"),
        ),
        pytest.param(ConfinePlan(seccomp_net=True), id="seccomp"),
        pytest.param(
            ConfinePlan(landlock=True, landlock_net=True, writable=["/tmp"]),
            id="landlock-net",
            marks=pytest.mark.skipif(landlock_abi() < 4, reason="Landlock ABI < 4"),
        ),
    ],
)
def test_no_connection_leaves(plan: ConfinePlan, tmp_path: Path) -> None:
    listener, port = _listener()
    try:
        proc = subprocess.run(
            launcher(plan, [sys.executable, "-c", CONNECT, str(port)]),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused"), proc.stdout


def test_seccomp_keeps_unix_sockets(tmp_path: Path) -> None:
    code = "import socket; a, b = socket.socketpair(); a.send(b'x'); print(b.recv(1).decode())"
    proc = confined(ConfinePlan(seccomp_net=True), code, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "x", proc.stderr


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A folder other users can traverse (pytest's tmp_path sits in a 0700 folder)."""
    folder = Path(tempfile.mkdtemp(prefix="ca-confine-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_root
def test_dedicated_user_owns_nothing_of_the_harness(open_tmp: Path) -> None:
    tmp_path = open_tmp
    uid = sandbox_uid(0)
    mine = tmp_path / "mine"
    mine.mkdir()
    os.chown(mine, uid, uid)
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    plan = ConfinePlan(uid=uid, gid=uid)
    argv = ["/bin/sh", "-c", f"id -u; id -G; touch {mine}/a && echo mine-ok; touch {theirs}/b"]
    proc = subprocess.run(launcher(plan, argv), capture_output=True, text=True, timeout=60)
    out = proc.stdout.split()
    assert out[:3] == [str(uid), str(uid), "mine-ok"], (proc.stdout, proc.stderr)
    assert proc.returncode != 0 and not (theirs / "b").exists()


def test_a_step_that_fails_stops_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    plan = ConfinePlan(rlimits={"no-such-limit": 1})
    proc = subprocess.run(
        launcher(plan, ["/bin/sh", "-c", f"touch {marker}"]), capture_output=True, text=True
    )
    assert proc.returncode == 126 and "confine" in proc.stderr
    assert not marker.exists()


def test_readable_roots_cover_everything_but_the_hidden(tmp_path: Path) -> None:
    hidden = tmp_path / "a" / "secret"
    hidden.mkdir(parents=True)
    (tmp_path / "a" / "public").mkdir()
    roots = readable_roots([str(hidden)])
    assert str(hidden) not in roots and str(tmp_path) not in roots
    assert str(tmp_path / "a" / "public") in roots
    assert not any(r == "/" for r in roots)
    assert readable_roots([]) == ["/"]


@needs_root
def test_the_dedicated_user_has_a_name(open_tmp: Path) -> None:
    """It has no passwd entry; ``getpass.getuser()`` reads LOGNAME and USER before asking
    getpwuid(), which fails for it: ``@torch.compile`` at import raised KeyError on the H200
    (a CUDA-L1 solution). Run through /bin/sh: this checkout's Python may be unreadable to it."""
    uid = sandbox_uid(0)
    plan = ConfinePlan(uid=uid, gid=uid)
    env = {k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME")}
    proc = subprocess.run(
        launcher(plan, ["/bin/sh", "-c", 'echo "$(id -u) $LOGNAME $USER"']),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=open_tmp,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(uid), "cuda-agent-sandbox", "cuda-agent-sandbox"]
