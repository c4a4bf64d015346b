"""A local HTTP server that speaks the OpenAI chat-completions API and replays a script.

Used by the demo (so the real client path, HTTP included, is exercised) and by the tests.
Each POST to ``/v1/chat/completions`` returns the next scripted assistant turn; requests are
recorded. ``fail_first`` makes the first N requests answer HTTP 503 (to test retries).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from cuda_agent.agent.local_endpoint import LocalEndpoint
from cuda_agent.agent.models import estimate_tokens, scripted_turn


class ReplayServer(LocalEndpoint):
    def __init__(self, turns: list[dict[str, Any]], fail_first: int = 0) -> None:
        self.turns = list(turns)
        self.requests: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, reply = server.respond(self.path, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)

    def respond(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not path.rstrip("/").endswith("/chat/completions"):
            return 404, {"error": {"message": f"no route {path}"}}
        with self._lock:
            self.requests.append(body)
            if self.fail_first > 0:
                self.fail_first -= 1
                return 503, {"error": {"message": "temporarily unavailable (scripted)"}}
            index = len([r for r in self.requests if r is not None]) - 1
            turn = self.turns.pop(0) if self.turns else {"content": "(no more turns)"}
        reply = scripted_turn(turn, index)
        message = reply.as_message()
        prompt = estimate_tokens(body.get("messages", []))
        completion = estimate_tokens([message])
        return 200, {
            "id": f"chatcmpl-replay-{index}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "replay"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
