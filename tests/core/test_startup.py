"""The collector is off during a process's fixed imports, and what they made is frozen."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import gc, json
from cuda_agent.core.startup import without_collection

before = gc.isenabled()
with without_collection():
    during = gc.isenabled()
    made = [[i] for i in range(1000)]  # objects the imports would make
after = gc.isenabled()
frozen = gc.get_freeze_count()
gc.disable()
with without_collection():
    pass
print(json.dumps({"before": before, "during": during, "after": after, "frozen": frozen,
                  "stays_off": not gc.isenabled()}))
"""


def test_the_collector_is_off_inside_then_on_with_the_imports_frozen() -> None:
    # a process of its own: freezing would change the test process's collector
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert state["before"] and not state["during"] and state["after"]
    assert state["frozen"] >= 1000  # the block's objects are in the permanent generation
    assert state["stays_off"]  # a collector the caller had turned off is left off


TRAINERS = """
import gc, json, sys
from cuda_agent.rl.trl import import_trainers

import_trainers()
print(json.dumps({"on": gc.isenabled(), "frozen": gc.get_freeze_count(),
                  "loaded": [m in sys.modules for m in ("torch", "transformers", "trl")]}))
"""


def test_a_training_command_imports_its_trainers_without_collections_then_freezes() -> None:
    pytest.importorskip("trl")
    done = subprocess.run(
        [sys.executable, "-c", TRAINERS], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout)
    assert state["on"] and state["loaded"] == [True, True, True]
    assert state["frozen"] > 100_000  # torch, transformers and TRL's objects: not walked again
