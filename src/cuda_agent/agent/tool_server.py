"""The harness side of the workspace commands: a Unix-socket server outside the sandbox.

``cuda-agent tool compile|verify|profile`` run by the agent inside its sandbox arrive here
(``workspace.tool_client``); the server evaluates the episode's workdir with the harness's
own problem copy and evaluator, one request at a time, and replies with the text. Every result
is handed to ``on_result`` (the rollout records it and keeps the best verified state). Only
those three commands on this one workdir are served.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.sockets import read_line
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import TOOL_COMMANDS, Evaluator, ToolReply, run_tool

OnResult = Callable[[str, ToolReply], None]


class ToolServer:
    def __init__(
        self,
        socket_path: Path,
        workdir: Path,
        options: EvalOptions,
        on_result: OnResult | None = None,
        evaluator: Evaluator = evaluate,
    ) -> None:
        self.socket_path = socket_path
        self.workdir = workdir
        self.options = options
        self.on_result = on_result
        self.evaluator = evaluator
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.served = 0

    def __enter__(self) -> ToolServer:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.socket_path))
        self.socket_path.chmod(0o777)
        self._sock.listen(4)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def handle(self, request: dict[str, Any]) -> ToolReply:
        argv = request.get("argv") or []
        command = argv[0] if argv else ""
        if command not in TOOL_COMMANDS:
            return ToolReply(
                2, f"error: unknown tool command {command!r} (use: {', '.join(TOOL_COMMANDS)})"
            )
        options = replace(self.options)
        if command == "verify" and "--baselines" in argv[1:-1]:
            value = argv[argv.index("--baselines") + 1]
            options.baselines = tuple(b for b in value.split(",") if b)
        with self._lock:
            try:
                reply = run_tool(command, self.workdir, options, self.evaluator)
            except CudaAgentError as err:
                reply = ToolReply(2, f"error: {err}")
            self.served += 1
        if self.on_result is not None:
            self.on_result(command, reply)
        return reply

    def _serve(self) -> None:
        assert self._sock is not None
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                try:
                    reply = self.handle(json.loads(read_line(conn, 1 << 20) or b"{}"))
                except json.JSONDecodeError:
                    reply = ToolReply(2, "error: malformed request")
                with contextlib.suppress(OSError):
                    conn.sendall(
                        json.dumps({"exit_code": reply.exit_code, "text": reply.text}).encode()
                        + b"\n"
                    )
