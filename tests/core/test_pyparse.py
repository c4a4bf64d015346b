"""``parse_module`` against CPython gh-106905 (the AST constructor's shared recursion depth).

The reproducer is deterministic: a garbage collection forced during a parse runs a finalizer,
which hands the GIL to a second thread that parses a source in full, and the first parse then
resumes with the depth the second one left. ``ast.parse`` fails it on interpreters before 3.11.8
(the reward service answered a submission 500 this way); ``parse_module`` must not, on any.
"""

from __future__ import annotations

import ast
import gc
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_agent.core.pyparse import parse_module

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "cuda_agent"
SOURCE = "\n".join(
    f"def f{i}(x):\n    return [(a, {{b: (c, d)}}) for a in x for b in a]" for i in range(200)
)
AFFECTED = sys.version_info < (3, 11, 8)


def parse_with_a_handover(parse: Callable[[str], ast.Module]) -> tuple[int, Exception | None]:
    """Parse ``SOURCE`` with the collector on at every allocation; each collection inside the
    parse (up to 20) lets another thread parse a small source in full. Returns how many
    hand-overs happened inside the parse and the error the parse raised, if any."""
    handovers: list[int] = []
    armed = [True]

    class Handover:
        self_ref: object

        def __del__(self) -> None:
            if not armed[0]:
                return
            again = Handover()  # a new cycle, for the next collection
            again.self_ref = again
            caller = sys._getframe().f_back  # inside a parse: ast.parse's frame
            if caller is None or caller.f_code is not ast.parse.__code__ or len(handovers) >= 20:
                return
            handovers.append(1)
            other = threading.Thread(target=parse, args=("x = [1, (2, 3)]\n",))
            other.start()
            other.join()

    first = Handover()
    first.self_ref = first
    del first
    error: Exception | None = None
    threshold = gc.get_threshold()
    gc.set_threshold(1)
    try:
        parse(SOURCE)
    except SystemError as err:
        error = err
    finally:
        gc.set_threshold(*threshold)
        armed[0] = False
        gc.collect()
    return len(handovers), error


@pytest.mark.skipif(not AFFECTED, reason="this interpreter's AST constructor has no shared depth")
def test_reproducer_plain_ast_parse_fails_on_this_interpreter() -> None:
    handovers, error = parse_with_a_handover(ast.parse)
    assert handovers > 0
    assert error is not None and "recursion depth mismatch" in str(error)


def test_parse_module_survives_the_handover() -> None:
    handovers, error = parse_with_a_handover(parse_module)
    assert error is None
    assert handovers == 0  # no collection, so no other thread, while the tree was built


def test_parse_module_restores_the_collector_and_raises_syntax_errors() -> None:
    assert gc.isenabled()
    tree = parse_module(SOURCE, "many.py")
    assert ast.dump(tree) == ast.dump(ast.parse(SOURCE))
    assert gc.isenabled()
    with pytest.raises(SyntaxError) as caught:
        parse_module("def broken(:\n", "broken.py")
    assert caught.value.filename == "broken.py" and gc.isenabled()
    gc.disable()
    try:
        parse_module("x = 1\n")
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


def test_parses_from_many_threads_leave_the_collector_on() -> None:
    errors: list[BaseException] = []

    def parse_often() -> None:
        try:
            for _ in range(20):
                parse_module(SOURCE)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=parse_often) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and gc.isenabled()


def test_every_parse_in_the_package_goes_through_parse_module() -> None:
    bare = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "pyparse.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bast\.parse\(|\bliteral_eval\(|PyCF_ONLY_AST", line)
    ]
    assert bare == []
