"""The service under load, killed in the middle: every acknowledged job ends with one result.

``LOAD_SUBMISSIONS`` submissions (250 in CI; the benchmark in docs/benchmarks.md runs 1,000)
from 32 concurrent clients (loopback, cpu backend). Most are solutions that fail the static
stage (a file without ``ModelNew``: no worker, so the load is the service's own); one in fifty
is a real evaluation. Each submission carries its own idempotency key, and a client whose
request fails because the service is down sends it again with the same key until it is
acknowledged. Once two in five are acknowledged the service is killed with SIGKILL and started
again on the same port and store. At the end every key has exactly one job, and every job
exactly one result. 250 keeps every part of that: 32 clients in flight at the kill, requests
sent again, real evaluations before and after it.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import httpx
import pytest

from tests.helpers import wait_for
from tests.service.helpers import TOKENS, Service, body, free_port

pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

SUBMISSIONS = int(os.environ.get("LOAD_SUBMISSIONS", "250"))
CLIENTS = 32
KILL_AFTER = SUBMISSIONS * 2 // 5
NO_MODEL = "import torch\n\nx = 1  # no ModelNew: a static verdict\n"


def test_submissions_under_load_and_a_sigkill(tmp_path: Path) -> None:
    port = free_port()
    services = [Service(tmp_path, port=port)]
    url = services[0].url
    acknowledged: dict[str, str] = {}  # key -> job id
    lock = threading.Lock()
    retried = [0]
    next_index = iter(range(SUBMISSIONS))

    def client() -> None:
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {TOKENS[0]}"}, timeout=60
        ) as http:
            for index in next_index:
                key = f"load-{index}"
                request = body(text=None if index % 50 == 0 else NO_MODEL, idempotency_key=key)
                while True:
                    try:
                        answer = http.post("/v1/jobs", json=request)
                    except httpx.TransportError:
                        with lock:
                            retried[0] += 1
                        wait_for(lambda: _up(url), deadline_s=600)
                        continue
                    assert answer.status_code == 202, answer.text
                    with lock:
                        acknowledged[key] = answer.json()["id"]
                    break

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    assert wait_for(lambda: len(acknowledged) >= KILL_AFTER, deadline_s=900)
    services[0].kill()
    services.append(Service(tmp_path, db=services[0].db, port=port))
    for thread in threads:
        thread.join()
    try:
        with services[1].client() as http:
            finals = {
                k: http.get(f"/v1/jobs/{i}", params={"wait": 300}).json()
                for k, i in acknowledged.items()
            }
    finally:
        assert services[1].stop() == 0
    states = [f["state"] for f in finals.values()]
    with sqlite3.connect(services[0].db) as db:
        rows = db.execute("SELECT idempotency_key, state, result FROM jobs").fetchall()
    summary = {
        "submitted": SUBMISSIONS,
        "acknowledged": len(acknowledged),
        "finished": states.count("done"),
        "lost": SUBMISSIONS - len({k for k, _, _ in rows}),
        "doubled": len(rows) - len({k for k, _, _ in rows}),
        "retried_requests": retried[0],
    }
    print(json.dumps(summary))
    assert summary == {
        **summary,
        "acknowledged": SUBMISSIONS,
        "finished": SUBMISSIONS,
        "lost": 0,
        "doubled": 0,
    }
    assert len(set(acknowledged.values())) == SUBMISSIONS
    verdicts = [
        json.loads(r)["error"]["stage"] if not json.loads(r)["correct"] else "correct"
        for _, _, r in rows
    ]
    assert (
        verdicts.count("correct") == SUBMISSIONS // 50
        and verdicts.count("static") == SUBMISSIONS - SUBMISSIONS // 50
    )


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/v1/health", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
