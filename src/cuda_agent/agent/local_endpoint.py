"""A loopback HTTP endpoint served from a daemon thread while a ``with`` block runs.

``LocalEndpoint(handler)`` binds 127.0.0.1 on a free port; entering starts serving, leaving
stops the loop and closes the socket. ``base_url`` is the OpenAI-style address the agent's
clients take (``http://127.0.0.1:PORT/v1``). The demo's replay server and the tests' provider
fixtures are built on it.

``http.server``'s loop notices a stop request only between polls (``serve_forever``'s
``poll_interval``, half a second by default), so every block that left one ended with a wait
of up to half a second; this one polls every ``core.sockets.SHUTDOWN_POLL_S``.

What it does not do: route requests (the handler does), bind beyond the loopback, or speak TLS.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

from cuda_agent.core.sockets import SHUTDOWN_POLL_S

Endpoint = TypeVar("Endpoint", bound="LocalEndpoint")


class LocalEndpoint:
    """``handler`` served on 127.0.0.1 (a free port) while inside ``with``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self: Endpoint) -> Endpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
