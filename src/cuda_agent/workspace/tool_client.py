"""``cuda-agent tool ...`` inside an agent's sandbox: forward the command to the harness.

Standard library only (and ``core/sockets.py``, itself so), so it starts in milliseconds. The
harness's tool server listens on the Unix socket named by ``CUDA_AGENT_TOOL_SOCKET``; it runs
the evaluation outside the sandbox (no network, no GPU and no write access to caches are needed
in here) and sends back the text and the exit status.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from cuda_agent.core.sockets import read_line

SOCKET_ENV = "CUDA_AGENT_TOOL_SOCKET"
TIMEOUT_S = 3600.0


def forward(argv: list[str]) -> int:
    """Send ``argv`` (``tool <command> [args]``) to the tool server; print its reply."""
    path = os.environ[SOCKET_ENV]
    request = {"argv": argv[1:], "cwd": os.getcwd()}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(TIMEOUT_S)
            sock.connect(path)
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = read_line(sock)
    except OSError as err:
        print(f"error: the evaluation service is not reachable ({err})", file=sys.stderr)
        return 2
    try:
        reply = json.loads(data)
    except json.JSONDecodeError:
        print("error: the evaluation service sent no reply", file=sys.stderr)
        return 2
    print(reply.get("text", ""))
    return int(reply.get("exit_code", 2))


def wants_forwarding(argv: list[str]) -> bool:
    return bool(os.environ.get(SOCKET_ENV)) and len(argv) >= 1 and argv[0] == "tool"
