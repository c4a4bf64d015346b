"""Python's cyclic garbage collector during an evaluation process's fixed imports.

A worker and a worker template import torch, dynamo and the harness before anything else:
about half a million objects that live as long as the process. With the collector's default
thresholds it runs over them again and again while they are imported (five full collections
that free almost nothing): 2.2-2.6 s of CPU for ``warm_imports`` on the 2-core machine, 1.9 s
with the collector off (2026-12-07). A worker started as a process of its own (bubblewrap, the
memory check's fallback) and every template pay it.

``without_collection`` turns the collector off for a block of imports; ``imports_done`` then
moves what exists into the permanent generation (``gc.freeze``), so that no later collection
in this process, or in a process forked from it, walks the imports again, and turns the
collector back on: cycles made after it (a request's) are collected as before. The imports'
own garbage stays (about 6 MB of the template's 370). At a normal exit the frozen objects
are handed back (``gc.unfreeze``), so the interpreter's last collection sees them as it would
have.

A training command asks too, for its trainers' imports (``rl.trl.import_trainers``: torch,
transformers, datasets and TRL, about 0.3 s of CPU less).

What it does not do: change the thresholds, or touch a process that did not ask (the CLI's
other commands, the service, a test process importing the harness keep the default collector).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Iterator
from contextlib import contextmanager


def collection_off() -> bool:
    """Turn the collector off for the imports that follow; whether it was on."""
    was_on = gc.isenabled()
    gc.disable()
    return was_on


def imports_done(collector_was_on: bool = True) -> None:
    """What exists now is the process's fixed state: frozen, then the collector back on
    (if it was on before ``collection_off``)."""
    gc.freeze()
    atexit.register(gc.unfreeze)
    if collector_was_on:
        gc.enable()


@contextmanager
def without_collection() -> Iterator[None]:
    """The block's imports without collections; what exists after it, frozen."""
    was_on = collection_off()
    try:
        yield
    finally:
        imports_done(was_on)
