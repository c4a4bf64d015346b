"""A cuda worker's host memory, watched against its cap; the system's out-of-memory kills, counted.

A cuda worker cannot run under an address-space limit (CUDA reserves far more virtual memory
than it ever uses; ``workspace/memory_cap.py``), so its host-memory cap is enforced from
outside: while the parent waits for the worker's record (``worker_process.py``), a
``MemoryWatch`` sums the anonymous resident memory (``RssAnon``: the heap, tensors on the host;
not the shared libraries, which every worker maps alike) of the worker and every process below
it, every ``WATCH_INTERVAL_S``, and says when the sum passes the cap; the parent then kills the
worker's group and the verdict names the cap (flag ``memory_cap``). Between two looks a worker
can allocate more than the cap: the watch stops a runaway allocation long before the host runs
out, it is not an exact bound.

``oom_kills()`` reads the kernel's count of processes its out-of-memory killer has killed
(``oom_kill`` in ``/proc/vmstat``, Linux 4.13+): a worker that died of SIGKILL that nobody here
sent, while that count rose, was killed by the OOM killer, and the verdict says so (flag
``host_oom``) instead of ``crashed``. The count is the host's: another process killed at the
same moment would be read the same way (rare; the message says the host ran out of memory, which
is true either way).

Does not cap cpu workers (``RLIMIT_AS`` does, in the sandbox's launcher), measure GPU memory,
or decide the cap's size (``workspace/memory_cap.py``). Linux only; elsewhere nothing is watched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.evaluator.launch.process_group import process_stats

WATCH_INTERVAL_S = 0.25
VMSTAT = Path("/proc/vmstat")
HOST_OOM_FLAG = "host_oom"


def children_of() -> dict[int, list[int]]:
    """Parent pid -> pids of its children, for every process this host shows in ``/proc``."""
    tree: dict[int, list[int]] = {}
    for pid, fields in process_stats():
        if len(fields) > 1:
            tree.setdefault(int(fields[1]), []).append(pid)
    return tree


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (children, their children...)."""
    tree, found, todo = children_of(), [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, ()))
    return found


def anonymous_resident_bytes(pid: int) -> int:
    """``RssAnon`` of ``pid`` in bytes (0 when it has exited or shows none)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def tree_anonymous_bytes(root: int) -> int:
    """The anonymous resident memory of ``root`` and every process below it, summed."""
    return sum(anonymous_resident_bytes(pid) for pid in process_tree(root))


@dataclass
class MemoryWatch:
    """Looks at a worker's tree at most once every ``interval_s``; ``exceeded`` once it passed."""

    root: int
    cap_bytes: int
    interval_s: float = WATCH_INTERVAL_S
    peak_bytes: int = 0
    exceeded: bool = False
    _next_at: float = 0.0

    def look(self) -> bool:
        """Measure (if the interval has passed) and say whether the cap has been passed."""
        now = time.monotonic()
        if self.exceeded or now < self._next_at:
            return self.exceeded
        self._next_at = now + self.interval_s
        used = tree_anonymous_bytes(self.root)
        self.peak_bytes = max(self.peak_bytes, used)
        self.exceeded = used > self.cap_bytes
        return self.exceeded


def oom_kills(vmstat: Path | None = None) -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (None: unknown);
    ``vmstat``: the file to read (default ``VMSTAT``)."""
    try:
        for line in (vmstat or VMSTAT).read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def killed_by_oom(before: int | None, after: int | None) -> bool:
    """Whether the OOM killer's count rose between ``before`` and ``after`` (both known)."""
    return before is not None and after is not None and after > before


def host_oom_message(stage: str) -> str:
    return (
        f"the evaluation process was killed by the system's out-of-memory killer during {stage} "
        "(the host ran out of memory; this host's other processes or this evaluation's own "
        "allocations may have used it up)"
    )
