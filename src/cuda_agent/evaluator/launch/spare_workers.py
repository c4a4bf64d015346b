"""Spare workers: started ahead of the evaluations that will take them.

What it does not do: start a worker itself (``worker_spawn.py``) or run a request
(``worker_process.py``, which takes a spare from here when asked to).
"""

from __future__ import annotations

import atexit
import functools
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuda_agent.evaluator.launch.worker_spawn import (
    WorkerHandle,
    discard,
    env_key,
    poll_ready,
    spawn_worker,
)


class SpareWorkers:
    """Keeps started workers per (backend, environment) so the next evaluation need not wait
    for Python, torch and CUDA to start. Isolation is unchanged: every evaluation still gets
    a fresh process; only its start-up moves off the critical path.

    ``depth`` spares are kept per environment: one hides the start-up when an evaluation takes
    longer than a worker's start (seconds); a stream of short evaluations (a sweep of
    reference solutions) needs several, started in a staggered way. At most ``max_envs``
    environments keep spares (the least recently used one's are stopped): a long-lived
    process that evaluates under many environments does not pile up idle workers.
    Thread-safe. Spares are started from one thread that lives as long as this object:
    bubblewrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) kills a child when the *thread*
    that started it ends, so a spare started by a short-lived thread (a service request)
    would be killed under the next evaluation.
    """

    def __init__(self, root: Path, max_envs: int = 4) -> None:
        self.root = root
        self.max_envs = max_envs
        self._spares: dict[str, list[WorkerHandle]] = {}  # insertion order = recency
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spare-spawner")
        atexit.register(self.close)

    def _spawn(
        self, backend: str, env: dict[str, str], sandboxed: bool, allow_unsandboxed: bool
    ) -> WorkerHandle:
        job = self._spawner.submit(
            spawn_worker,
            backend,
            env,
            self._folder(),
            sandboxed=sandboxed,
            allow_unsandboxed=allow_unsandboxed,
        )
        return job.result()

    def take(
        self,
        backend: str,
        env: dict[str, str],
        sandboxed: bool = False,
        depth: int = 1,
        allow_unsandboxed: bool = False,
    ) -> WorkerHandle:
        """A started worker for this environment: a spare done warming up, else the oldest
        spare, else one started now; then the spares are topped up to ``depth``."""
        start = functools.partial(self._spawn, backend, env, sandboxed, allow_unsandboxed)
        with self._lock:
            queue = self._queue(env_key(backend, env, sandboxed))
            for handle in [h for h in queue if h.proc.poll() is not None]:
                queue.remove(handle)
                discard(handle)
            for handle in queue:
                poll_ready(handle, 0.0)
            chosen = next((h for h in queue if h.ready), queue[0] if queue else None)
            if chosen is None:
                chosen = start()
            else:
                queue.remove(chosen)
            _top_up(queue, start, depth)
        return chosen

    def prime(
        self,
        backend: str,
        env: dict[str, str],
        sandboxed: bool = False,
        depth: int = 1,
        allow_unsandboxed: bool = False,
    ) -> None:
        """Start spares for this environment (up to ``depth``) without taking one."""
        start = functools.partial(self._spawn, backend, env, sandboxed, allow_unsandboxed)
        with self._lock:
            _top_up(self._queue(env_key(backend, env, sandboxed)), start, depth)

    def waiting(self, backend: str, env: dict[str, str], sandboxed: bool = False) -> int:
        """How many started spares wait for an evaluation in this environment."""
        with self._lock:
            return len(self._spares.get(env_key(backend, env, sandboxed), []))

    def ready(self, backend: str, env: dict[str, str], sandboxed: bool = False) -> int:
        """How many of this environment's spares have finished their warm start."""
        with self._lock:
            queue = self._spares.get(env_key(backend, env, sandboxed), [])
            for handle in queue:
                if handle.proc.poll() is None:
                    poll_ready(handle, 0.0)
            return sum(1 for h in queue if h.ready and h.proc.poll() is None)

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until every spare has finished its warm start (True) or the timeout passes."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            handles = [h for queue in self._spares.values() for h in queue]
        for handle in handles:
            while not handle.ready:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or handle.proc.poll() is not None:
                    return False
                poll_ready(handle, min(remaining, 1.0))
        return True

    def close(self) -> None:
        with self._lock:
            for queue in self._spares.values():
                for handle in queue:
                    discard(handle)
            self._spares.clear()

    def _queue(self, key: str) -> list[WorkerHandle]:
        """This environment's spares, now the most recently used; evicts the oldest env's."""
        queue = self._spares.pop(key, [])
        self._spares[key] = queue
        while len(self._spares) > max(1, self.max_envs):
            oldest = next(iter(self._spares))
            for handle in self._spares.pop(oldest):
                discard(handle)
        return queue

    def _folder(self) -> Path:
        return self.root / f"worker-{secrets.token_hex(6)}"


def _top_up(queue: list[WorkerHandle], start: Callable[[], WorkerHandle], depth: int) -> None:
    """Start workers (``start``) onto ``queue`` until it holds ``depth`` of them (one at least)."""
    while len(queue) < max(1, depth):
        queue.append(start())
