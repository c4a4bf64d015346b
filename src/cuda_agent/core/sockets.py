"""One newline-ended message from a stream socket (the tool server's and the evaluation
service's requests and replies are one JSON object a line), and how often a served socket's
loop looks for a request to stop.

Standard library only: ``workspace/tool_client.py``, which starts in milliseconds inside an
agent's sandbox, reads its reply with it.
"""

from __future__ import annotations

import socket

# ``socketserver``'s loops notice ``shutdown()`` only between polls: half a second by default,
# which every stop of a service or a local endpoint waited out
SHUTDOWN_POLL_S = 0.05


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
