"""``agent/local_endpoint.py``: the loopback endpoint the demo's replay server and the tests'
provider fixtures serve from; leaving its block stops the serving thread and frees the port."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from cuda_agent.agent.models import OpenAIChatModel
from cuda_agent.agent.replay_server import ReplayServer


def test_leaving_the_block_stops_the_thread_and_closes_the_port() -> None:
    with ReplayServer([{"content": "hello"}]) as server:
        url = server.base_url
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        model = OpenAIChatModel("m", url, "key", transport="stdlib")
        assert model.complete([{"role": "user", "content": "hi"}], [], 16).content == "hello"
        assert server.thread.is_alive()
    assert not server.thread.is_alive()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/chat/completions", data=b"{}", timeout=5)
