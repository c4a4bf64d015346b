"""Worker templates shared by every command of a cache: torch's import paid once, not per command.

A template (``evaluator/worker/template.py``) imports Python, torch, dynamo and the harness
(about 3 s of CPU) and then forks workers. Each command that evaluates used to start its own
(the CLI's ``eval``, ``verify``, ``profile``, a benchmark, a service): the same
seconds again for every command. Here a template is started once per (backend, worker
environment, code) and left running, listening on a Unix socket in the cache's secret folder,
until it has had no connection and no worker for ``CUDA_AGENT_TEMPLATE_IDLE_S`` seconds (60
by default); the next command connects to it instead of starting its own.

Why this does not weaken isolation:

- The socket lives in ``<cache>/secret/templates/`` (``0700``), a folder every sandbox mode
  hides (``core/secret.py``), and a connection must first show a token derived from the
  harness's secret key, which a sandboxed process cannot read. A process without the key
  (``secret.available()`` false) never shares.
- A worker forked for a connection confines itself with that connection's plan, exactly as
  a private template's does, and is killed when that connection closes (its command ended).
- The key includes the worker environment that matters to the imports (as for private
  templates: not our own ``CUDA_AGENT_*`` variables, read at run time, nor pytest's
  ``PYTEST_*``), the interpreter, and a fingerprint of the package's source (each file's
  size and modification time): after an edit or a reinstall, commands start a new template.

``CUDA_AGENT_SHARED_TEMPLATES=0`` turns sharing off (each process starts its own templates, as
before). Where the socket's path would be too long for ``AF_UNIX``, that template is private.

What it does not do: send orders or read exits (``worker_template.Template``), or decide which
workers are forked at all (``worker_spawn.py``).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from cuda_agent.core import secret
from cuda_agent.core.locks import exclusive_file_lock
from cuda_agent.core.paths import package_root

SHARED_ENV = "CUDA_AGENT_SHARED_TEMPLATES"  # "0": every process starts its own templates
IDLE_ENV = "CUDA_AGENT_TEMPLATE_IDLE_S"
DEFAULT_IDLE_S = 60.0
MAX_SOCKET_PATH = 107  # sun_path's 108 bytes, its terminating NUL included


def templates_dir() -> Path:
    return secret.secret_dir() / "templates"


@functools.cache
def code_fingerprint(root: Path | None = None) -> str:
    """The interpreter and every source file of the package (path, size, modification time):
    a template started before an edit or a reinstall is not used after it."""
    root = root or package_root()
    digest = hashlib.sha256(f"{sys.executable}\0{sys.version}".encode())
    for path in sorted(_sources(root)):
        with contextlib.suppress(OSError):
            stat = path.stat()
            digest.update(
                f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode()
            )
    return digest.hexdigest()


def _sources(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith((".py", ".h", ".cpp", ".cu")):
                yield Path(folder) / name


def shared_socket(key: str) -> Path | None:
    """Where the shared template for ``key`` listens, or None where it cannot be shared."""
    if os.environ.get(SHARED_ENV, "1") == "0" or not secret.available():
        return None
    name = hashlib.sha256(f"{key}\0{code_fingerprint()}".encode("utf-8", "surrogatepass"))
    path = templates_dir() / f"{name.hexdigest()[:24]}.sock"
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return None
    return path


def token_for(path: Path) -> str:
    """What a connection to the template at ``path`` must show first (from the secret key)."""
    return hmac.new(secret.key(), f"worker-template\0{path.name}".encode(), "sha256").hexdigest()


def idle_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S)))
    except ValueError:
        return DEFAULT_IDLE_S


def connect(path: Path, env: dict[str, str], log_path: Path) -> socket.socket:
    """A connection to the template at ``path``, started now (with ``env``, its output to
    ``log_path``) if none listens there; its token already sent. ``OSError`` if neither works.
    The template's greeting (or its refusal) is the connection's first message."""
    folder = path.parent
    secret.secret_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    token = token_for(path)
    with exclusive_file_lock(_lock_path(path)):
        conn = _try_connect(path)
        if conn is None:
            _start(path, env, log_path, token)
            conn = _try_connect(path)
            if conn is None:
                raise OSError(f"the shared worker template at {path} did not listen")
    try:
        conn.send(f'{{"token": "{token}"}}'.encode())
    except OSError:
        conn.close()
        raise
    return conn


def start_template_process(
    options: list[str],
    fd: int,
    env: dict[str, str],
    log_path: Path,
    cwd: Path,
    stdin: int = subprocess.DEVNULL,
) -> subprocess.Popen[bytes]:
    """``python -m cuda_agent.evaluator.worker.template OPTIONS`` in a session of its own,
    with ``fd`` (its control or listening socket) passed and its output appended to
    ``log_path``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            [sys.executable, "-m", "cuda_agent.evaluator.worker.template", *options],
            env=env,
            stdin=stdin,
            stdout=log_file,
            stderr=log_file,
            pass_fds=(fd,),
            start_new_session=True,
            cwd=str(cwd),
        )


def _lock_path(path: Path) -> Path:
    """The lock a client holds while it connects to (or starts) the template at ``path``, and
    the template while it decides to stop listening there."""
    return path.with_suffix(".lock")


def _try_connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def _start(path: Path, env: dict[str, str], log_path: Path, token: str) -> None:
    """Bind the socket here (so it listens before the template has imported anything), and
    hand it to a template that leaves this process at once (it forks, its starter exits)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a template that is gone (nothing answered on it)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(64)
        starter = start_template_process(
            [
                f"--listen-fd={listener.fileno()}",
                f"--lock={_lock_path(path)}",
                f"--idle-s={idle_seconds()}",
            ],
            listener.fileno(),
            env,
            log_path,
            cwd=path.parent,
            stdin=subprocess.PIPE,
        )
        assert starter.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            starter.stdin.write(f"{token}\n".encode())
            starter.stdin.close()
        starter.wait(timeout=60)  # it forks the template and exits before any import
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    finally:
        listener.close()
