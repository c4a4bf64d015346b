"""A caller's request to stop an evaluation: an optional ``threading.Event``.

The reward service's DELETE of a running job sets its job's event; the pool, the pipeline, its
follow-ups and the worker's reader look at it (``None``: nobody can stop this evaluation).
What it does not do: stop anything itself (each holder kills its own processes).
"""

from __future__ import annotations

import threading


def requested(cancel: threading.Event | None) -> bool:
    """Whether the caller has asked to stop (never, where there is no event)."""
    return cancel is not None and cancel.is_set()
