"""The persistent shell and the sandbox, with real processes."""

import os
import socket
from pathlib import Path

import pytest

from cuda_agent.agent.shell import PersistentShell
from cuda_agent.workspace.sandbox import Sandbox, SandboxPolicy, bwrap_usable

needs_bwrap = pytest.mark.skipif(not bwrap_usable(), reason="bubblewrap is not usable here")


def shell(tmp_path: Path, use_bwrap: bool, **policy: object) -> PersistentShell:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    sandbox = Sandbox(
        SandboxPolicy(workdir=work, tmpdir=tmp_path / "tmp", **policy),  # type: ignore[arg-type]
        use_bwrap=use_bwrap,
    )
    return PersistentShell(sandbox)


@pytest.mark.parametrize("use_bwrap", [pytest.param(True, marks=needs_bwrap), False])
def test_state_persists_and_exit_codes_come_back(tmp_path: Path, use_bwrap: bool) -> None:
    sh = shell(tmp_path, use_bwrap)
    try:
        assert sh.run("mkdir -p sub && cd sub && export X=42", 10).exit_code == 0
        result = sh.run("pwd; echo $X; false", 10)
        assert result.output.splitlines() == [str(tmp_path / "work" / "sub"), "42"]
        assert result.exit_code == 1
        assert sh.run("cat", 5).exit_code == 0  # stdin is /dev/null: no hang
    finally:
        sh.close()


@pytest.mark.parametrize("use_bwrap", [pytest.param(True, marks=needs_bwrap), False])
def test_timeout_kills_the_command_and_restarts_the_shell(tmp_path: Path, use_bwrap: bool) -> None:
    sh = shell(tmp_path, use_bwrap)
    try:
        marker = tmp_path / "work" / "late"
        result = sh.run(f"sleep 30; touch {marker}", 1.5)
        assert result.timed_out and result.exit_code is None
        again = sh.run("echo alive", 10)
        assert again.restarted and again.output.strip() == "alive"
    finally:
        sh.close()
    assert not marker.exists()


def test_environment_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    sh = shell(tmp_path, use_bwrap=False)
    try:
        assert "SECRET_TOKEN" not in sh.run("env", 10).output
    finally:
        sh.close()


MODES = [pytest.param(True, marks=needs_bwrap, id="bwrap"), pytest.param(False, id="confine")]


@pytest.mark.parametrize("use_bwrap", MODES)
def test_writes_outside_the_workdir_fail(tmp_path: Path, use_bwrap: bool) -> None:
    outside = Path("/var/tmp") / f"cuda-agent-test-{os.getpid()}.txt"  # outside /tmp and work
    sh = shell(tmp_path, use_bwrap=use_bwrap)
    try:
        result = sh.run(f'echo pwned > {outside}; touch "$TMPDIR/ok" && echo tmp-ok', 10)
    finally:
        sh.close()
    assert not outside.exists()
    refusal = "Read-only file system" if use_bwrap else "Permission denied"
    assert refusal in result.output and "tmp-ok" in result.output
    assert (tmp_path / "tmp" / "ok").exists()  # the private /tmp is the policy's tmpdir


@pytest.mark.parametrize("use_bwrap", MODES)
def test_no_network_inside(tmp_path: Path, use_bwrap: bool) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    sh = shell(tmp_path, use_bwrap=use_bwrap)
    try:
        code = (
            f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
            "print('connected')"
        )
        result = sh.run(f'python3 -c "{code}"', 20)
    finally:
        sh.close()
        listener.close()
    assert "connected" not in result.output
    assert result.exit_code != 0


@pytest.mark.parametrize("use_bwrap", MODES)
def test_hidden_paths_cannot_be_read(tmp_path: Path, use_bwrap: bool) -> None:
    secret = tmp_path / "cache"
    secret.mkdir()
    (secret / "baseline.json").write_text("{}")
    sh = shell(tmp_path, use_bwrap=use_bwrap, hidden=(secret,))
    try:
        listing = sh.run(f"ls -A {secret} 2>/dev/null | wc -l", 10).output.strip()
        read = sh.run(f"cat {secret}/baseline.json", 10)
    finally:
        sh.close()
    assert listing == "0" and read.exit_code != 0
    assert os.path.exists(secret / "baseline.json")


@pytest.mark.parametrize("use_bwrap", [pytest.param(True, marks=needs_bwrap), False])
def test_cuda_agent_command_exists_even_when_not_installed(tmp_path: Path, use_bwrap: bool) -> None:
    """The workspace commands run through a launcher on PATH, not only an installed script."""
    sh = shell(tmp_path, use_bwrap)
    try:
        result = sh.run('echo "$PATH"; "$TMPDIR/.bin/cuda-agent" --version', 60)
    finally:
        sh.close()
    from cuda_agent import __version__

    assert result.exit_code == 0, result.output
    path_line, version = result.output.strip().splitlines()[-2:]
    assert "/.bin" in path_line and version == __version__
