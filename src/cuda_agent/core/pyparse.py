"""``parse_module``: ``ast.parse`` that another thread cannot break, for every parse in the package.

CPython before 3.11.8 keeps the AST constructor's recursion depth in state the whole interpreter
shares (CPython gh-106905). The constructor runs no Python code of its own, so the thread building
a tree keeps the GIL, except when an allocation starts a garbage collection: the finalizers and
weakref callbacks a collection runs are Python code, and the GIL can pass to another thread there.
If that thread parses too (ours, or the ``traceback`` module formatting an error), it resets the
shared depth, and the first parse raises ``SystemError: AST constructor recursion depth mismatch``
for a source that is fine. The reward service hit it under load: a submission's problem check
failed this way and was answered 500 (``tests/core/test_pyparse.py`` reproduces the race
deterministically; which thread parsed beside it was not recorded).

``parse_module`` holds garbage collection off while it parses (counted across threads, so the
collector comes back when the last parse ends, and only if it was on before), so no Python code
runs, and no other thread, while the tree is built. Nothing is caught or retried: a syntax error
is raised as ``ast.parse`` raises it. What this does not do: protect a parse made by other code
(``traceback``, a library) from being interrupted; only a fixed interpreter does that.
"""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_parses = 0  # parses in progress, all threads
_collector_was_on = False


@contextmanager
def _collection_held() -> Iterator[None]:
    global _parses, _collector_was_on
    with _lock:
        if _parses == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _parses += 1
    try:
        yield
    finally:
        with _lock:
            _parses -= 1
            if _parses == 0 and _collector_was_on:
                gc.enable()


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` with garbage collection held off while the tree is built."""
    with _collection_held():
        return ast.parse(source, filename=filename)
