"""Worker templates shared across commands: one torch import for every command of a cache,
each command's workers still its own, nobody without the harness's key let in."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.evaluator.launch.shared_template import (
    IDLE_ENV,
    SHARED_ENV,
    code_fingerprint,
    shared_socket,
)
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.evaluator.launch.worker_template import Template, Templates
from tests.helpers import wait_for

pytestmark = pytest.mark.slow  # templates import torch


@pytest.fixture
def short_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache of its own at a short path (a Unix socket's path has at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="ca-", dir="/tmp"))
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(folder))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def _fork(template: Template, folder: Path) -> int:
    folder.mkdir()
    worker, read_fd = template.fork(worker_env(), folder, None, folder / "o", folder / "e")
    os.close(read_fd)
    return worker.pid


def test_two_commands_share_a_template_and_each_keeps_its_own_workers(
    short_cache: Path, tmp_path: Path
) -> None:
    first, second = Templates(tmp_path / "a"), Templates(tmp_path / "b")  # two commands
    try:
        one = first.get("cpu", worker_env(), "k")
        two = second.get("cpu", worker_env(), "k")
        assert one.shared and two.shared
        assert one.pid == two.pid  # one process imported torch for both
        template = one.pid
        mine, theirs = _fork(one, tmp_path / "w1"), _fork(two, tmp_path / "w2")
        first.close()  # the first command ends: its worker goes, the template stays
        assert wait_for(lambda: not _alive(mine), deadline_s=120)
        assert _alive(theirs) and _alive(template)
    finally:
        first.close()
        second.close()
    assert wait_for(lambda: not _alive(theirs), deadline_s=120)


def test_an_idle_template_exits_and_takes_its_socket_with_it(
    short_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(IDLE_ENV, "0.2")
    templates = Templates(tmp_path / "t")
    template = templates.get("cpu", worker_env(), "k")
    pid = template.pid
    path = shared_socket("k")
    assert path is not None and path.exists()
    templates.close()
    assert wait_for(lambda: not _alive(pid), deadline_s=120)
    assert not path.exists()
    again = Templates(tmp_path / "t2")  # the next command starts a new one
    try:
        assert again.get("cpu", worker_env(), "k").pid != pid
    finally:
        again.close()


def test_a_connection_without_the_token_gets_no_worker(short_cache: Path, tmp_path: Path) -> None:
    templates = Templates(tmp_path / "t")
    try:
        template = templates.get("cpu", worker_env(), "k")
        template.wait_ready()
        path = shared_socket("k")
        assert path is not None
        for first in ({"token": "0" * 64}, {"id": 1, "backend": "cpu", "env": {}, "cwd": "/"}):
            intruder = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            intruder.connect(str(path))
            pipes = [os.pipe() for _ in range(2)]
            fds = [pipes[0][0], pipes[1][1], pipes[0][1], pipes[1][0]]
            socket.send_fds(intruder, [json.dumps(first).encode()], fds)
            intruder.settimeout(120)
            assert intruder.recv(1 << 16) == b""  # closed: no greeting, no fork
            intruder.close()
            for read_end, write_end in pipes:
                os.close(read_end)
                os.close(write_end)
        assert template.alive()  # and the template serves its own as before
        worker = _fork(template, tmp_path / "w")
        assert _alive(worker)
    finally:
        templates.close()


def test_an_edit_of_the_package_changes_the_fingerprint(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    (package / "notes.txt").write_text("not code\n")
    before = code_fingerprint(package)
    code_fingerprint.cache_clear()
    (package / "notes.txt").write_text("still not code\n")
    assert code_fingerprint(package) == before
    code_fingerprint.cache_clear()
    (package / "a.py").write_text("x = 2\n")
    os.utime(package / "a.py", ns=(1, 1))
    assert code_fingerprint(package) != before
    code_fingerprint.cache_clear()


def test_sharing_off_or_a_path_too_long_gives_a_private_template(
    short_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SHARED_ENV, "0")
    assert shared_socket("k") is None
    monkeypatch.delenv(SHARED_ENV)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(short_cache / ("x" * 90)))
    assert shared_socket("k") is None
    templates = Templates(tmp_path / "t")
    try:
        template = templates.get("cpu", worker_env(), "k")
        assert not template.shared
        worker = _fork(template, tmp_path / "w")
        assert _alive(worker)
        os.killpg(worker, signal.SIGKILL)
    finally:
        templates.close()
