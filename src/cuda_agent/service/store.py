"""The job store: every job of the HTTP service, in SQLite, written before it is acknowledged.

A job moves ``queued`` -> ``running`` -> ``done`` (a result: any verdict) or ``failed`` (the
service could not evaluate it: its deadline passed, or the evaluation died twice), or
``cancelled``. Each transition is one transaction, and ``finish`` only moves a job that is
still ``running`` under the attempt that claimed it, so a result is stored exactly once even
if a restarted service evaluates the job again. At start, jobs left ``running`` by a service
that died go back to ``queued`` (a second such restart fails them). ``(tenant,
idempotency_key)`` is unique: a resubmission returns the first job.

What it does not do: evaluate (``scheduler.py``), or check who may see a job (callers pass the
tenant; every read is filtered by it).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.core.types import EvalResult

STATES = ("queued", "running", "done", "failed", "cancelled")
FINAL = ("done", "failed", "cancelled")
MAX_ATTEMPTS = 2  # a crashed evaluation is retried once

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    idempotency_key TEXT,
    state TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    deadline REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    request TEXT NOT NULL,
    result TEXT,
    error TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS jobs_idem ON jobs (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS problems (
    hash TEXT PRIMARY KEY,
    source TEXT NOT NULL
);
"""


@dataclass
class Job:
    id: str
    tenant: str
    state: str
    created: float
    deadline: float
    attempts: int
    request: dict[str, Any]
    result: dict[str, Any] | None = None
    error: str | None = None
    started: float | None = None
    finished: float | None = None
    idempotency_key: str | None = None

    def view(self) -> dict[str, Any]:
        """What a client is shown (the request stays server-side)."""
        return {
            "id": self.id,
            "state": self.state,
            "created": self.created,
            "started": self.started,
            "finished": self.finished,
            "deadline": self.deadline,
            "attempts": self.attempts,
            "result": self.result,
            "error": self.error,
            "idempotency_key": self.idempotency_key,
        }


class JobStore:
    """Thread-safe; one connection, serialised (SQLite in WAL mode)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # an acknowledged job survives a crash
        self._db.executescript(SCHEMA)
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)

    # -- writes --------------------------------------------------------------------------------

    def submit(
        self,
        tenant: str,
        request: dict[str, Any],
        deadline_s: float,
        idempotency_key: str | None = None,
    ) -> tuple[Job, bool]:
        """Store a new queued job; (the job, True) or, for a known key, (the first, False)."""
        now = time.time()
        job_id = secrets.token_hex(12)
        with self._lock:
            if idempotency_key is not None:
                known = self._one(
                    "SELECT * FROM jobs WHERE tenant = ? AND idempotency_key = ?",
                    (tenant, idempotency_key),
                )
                if known is not None:
                    return known, False
            self._db.execute(
                "INSERT INTO jobs (id, tenant, idempotency_key, state, created, deadline, "
                "request) VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                (job_id, tenant, idempotency_key, now, now + deadline_s, json.dumps(request)),
            )
            self.changed.notify_all()
            job = self._one("SELECT * FROM jobs WHERE id = ?", (job_id,))
        assert job is not None
        return job, True

    def claim(self, limit: int) -> list[Job]:
        """Move up to ``limit`` queued jobs (oldest first) to running, one attempt more each;
        jobs past their deadline are failed instead."""
        now = time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "UPDATE jobs SET state = 'failed', finished = ?, error = ? "
                    "WHERE state = 'queued' AND deadline <= ?",
                    (now, "its deadline passed before it could run", now),
                )
                rows = self._db.execute(
                    "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created LIMIT ?",
                    (limit,),
                ).fetchall()
                ids = [r[0] for r in rows]
                for job_id in ids:
                    self._db.execute(
                        "UPDATE jobs SET state = 'running', started = ?, attempts = attempts + 1 "
                        "WHERE id = ?",
                        (now, job_id),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            jobs = [self._one("SELECT * FROM jobs WHERE id = ?", (i,)) for i in ids]
        return [j for j in jobs if j is not None]

    def finish(
        self,
        job_id: str,
        attempt: int,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> bool:
        """Store the outcome of ``attempt`` if the job is still running under it (True);
        a job cancelled, or finished by another attempt, keeps what it has (False)."""
        state = "done" if result is not None else "failed"
        with self._lock:
            cursor = self._db.execute(
                "UPDATE jobs SET state = ?, finished = ?, result = ?, error = ? "
                "WHERE id = ? AND state = 'running' AND attempts = ?",
                (
                    state,
                    time.time(),
                    json.dumps(result) if result is not None else None,
                    error,
                    job_id,
                    attempt,
                ),
            )
            self.changed.notify_all()
            return cursor.rowcount == 1

    def cancel(self, tenant: str, job_id: str) -> Job | None:
        """Cancel a job that has not finished (a running one's result is then dropped)."""
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state = 'cancelled', finished = ? "
                "WHERE id = ? AND tenant = ? AND state IN ('queued', 'running')",
                (time.time(), job_id, tenant),
            )
            self.changed.notify_all()
            return self._one("SELECT * FROM jobs WHERE id = ? AND tenant = ?", (job_id, tenant))

    def recover(self) -> int:
        """At start: jobs a dead service left running go back to the queue, or fail after
        ``MAX_ATTEMPTS``; the number requeued."""
        with self._lock:
            self._db.execute(
                "UPDATE jobs SET state = 'failed', finished = ?, error = ? "
                "WHERE state = 'running' AND attempts >= ?",
                (
                    time.time(),
                    "the evaluation stopped twice (service or worker died)",
                    MAX_ATTEMPTS,
                ),
            )
            cursor = self._db.execute("UPDATE jobs SET state = 'queued' WHERE state = 'running'")
            return cursor.rowcount

    def requeue(self, job_id: str, attempt: int, error: str) -> None:
        """An attempt that crashed: queue the job again, or fail it after the last attempt."""
        with self._lock:
            row = self._db.execute(
                "SELECT attempts FROM jobs WHERE id = ? AND state = 'running' AND attempts = ?",
                (job_id, attempt),
            ).fetchone()
            if row is None:
                return
            if row[0] >= MAX_ATTEMPTS:
                self._db.execute(
                    "UPDATE jobs SET state = 'failed', finished = ?, error = ? WHERE id = ?",
                    (time.time(), error, job_id),
                )
            else:
                self._db.execute("UPDATE jobs SET state = 'queued' WHERE id = ?", (job_id,))
            self.changed.notify_all()

    def remember_problem(self, content_hash: str, source: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO problems (hash, source) VALUES (?, ?)",
                (content_hash, source),
            )

    # -- reads ---------------------------------------------------------------------------------

    def get(self, tenant: str, job_id: str) -> Job | None:
        with self._lock:
            return self._one("SELECT * FROM jobs WHERE id = ? AND tenant = ?", (job_id, tenant))

    def state_of(self, job_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT state FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return str(row[0]) if row else None

    def problem_source(self, content_hash: str) -> str | None:
        with self._lock:
            row = self._db.execute(
                "SELECT source FROM problems WHERE hash = ?", (content_hash,)
            ).fetchone()
        return str(row[0]) if row else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall()
        out = dict.fromkeys(STATES, 0)
        out.update({str(state): int(n) for state, n in rows})
        return out

    def verdicts(self) -> dict[str, int]:
        """Finished results by verdict (``correct``, or the failing stage)."""
        with self._lock:
            rows = self._db.execute("SELECT result FROM jobs WHERE state = 'done'").fetchall()
        out: dict[str, int] = {}
        for (text,) in rows:
            verdict = EvalResult.from_dict(json.loads(text)).outcome
            out[verdict] = out.get(verdict, 0) + 1
        return out

    def wait_final(self, tenant: str, job_id: str, timeout_s: float) -> Job | None:
        """The job once it is final, or as it is when ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                job = self._one("SELECT * FROM jobs WHERE id = ? AND tenant = ?", (job_id, tenant))
                left = deadline - time.monotonic()
                if job is None or job.state in FINAL or left <= 0:
                    return job
                self.changed.wait(min(left, 5.0))

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _one(self, sql: str, args: tuple[Any, ...]) -> Job | None:
        cursor = self._db.execute(sql, args)
        row = cursor.fetchone()
        if row is None:
            return None
        names = [d[0] for d in cursor.description]
        data = dict(zip(names, row, strict=True))
        return Job(
            id=data["id"],
            tenant=data["tenant"],
            state=data["state"],
            created=data["created"],
            deadline=data["deadline"],
            attempts=data["attempts"],
            request=json.loads(data["request"]),
            result=json.loads(data["result"]) if data["result"] else None,
            error=data["error"],
            started=data["started"],
            finished=data["finished"],
            idempotency_key=data["idempotency_key"],
        )
