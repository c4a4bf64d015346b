"""One newline-ended message from a stream socket (the tool server's and the evaluation
service's requests and replies are one JSON object a line).

Standard library only: ``workspace/tool_client.py``, which starts in milliseconds inside an
agent's sandbox, reads its reply with it.
"""

from __future__ import annotations

import socket


def read_line(sock: socket.socket, limit: int | None = None) -> bytes:
    """What ``sock`` sends, read until it ends in a newline or the peer closes, or (``limit``
    given) once at least ``limit`` bytes came."""
    data = b""
    while not data.endswith(b"\n") and (limit is None or len(data) < limit):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data
