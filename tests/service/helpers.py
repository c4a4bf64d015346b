"""A real reward service in a subprocess on the loopback, and small clients for tests."""

from __future__ import annotations

import base64
import io
import os
import re
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import wait_for

TOKENS = ("tenant-a-token-0123456789", "tenant-b-token-0123456789")
URL_LINE = re.compile(r"on (http://[\w.\[\]:]+)")


class Service:
    """``cuda-agent serve --http 127.0.0.1:0`` with two tenants' tokens and its own store."""

    def __init__(
        self, folder: Path, db: Path | None = None, tokens: bool = True, port: int = 0
    ) -> None:
        self.folder = folder
        self.db = db or folder / "jobs.sqlite"
        self.log = folder / f"service-{time.monotonic_ns()}.log"
        env = {**os.environ, "CA_TEST_TOKENS": ",".join(TOKENS)}
        args = [sys.executable, "-m", "cuda_agent", "serve", "--http", f"127.0.0.1:{port}"]
        args += ["--backend", "cpu", "--db", str(self.db)]
        if tokens:
            args += ["--token-env", "CA_TEST_TOKENS"]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
        found = wait_for(lambda: URL_LINE.search(self.log.read_text()), self.proc, 600)
        assert found, f"the service did not start: {self.log.read_text()[-3000:]}"
        self.url = found.group(1)

    def client(self, token: str | None = TOKENS[0]) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=120)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


def relu_text(expr: str = "torch.relu(x)") -> str:
    """A pure-PyTorch single file (scored under ``policy: off``, no build needed)."""
    return (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        f"    def forward(self, x):\n        return {expr}\n"
    )


def body(text: str | None = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "problem": {"id": "relu"},
        "size": "small",
        "solution": {"text": text if text is not None else relu_text()},
        "options": {"policy": "off", "baselines": [], "trials": 1},
    }
    out.update(extra)
    return out


def tar_b64(members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info in members:
            blob = (data or {}).get(info.name)
            tar.addfile(info, io.BytesIO(blob) if blob is not None else None)
    return base64.b64encode(buffer.getvalue()).decode()


def file_member(name: str, text: str) -> tuple[tarfile.TarInfo, bytes]:
    blob = text.encode()
    info = tarfile.TarInfo(name)
    info.size = len(blob)
    return info, blob


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
