"""Test configuration: a shared build cache, one torch thread per process, workers under
``confine`` where it is available, GPU skips, the slow tests first, and the tier report.

``make test-all`` distributes with ``--dist loadgroup --no-loadscope-reorder``: a test marked
``xdist_group(name)`` runs on the same worker as the others of its group, one after another
(tests that make the same costly thing: the later ones find it in the build cache, or the
module's fixture already started, where side by side each worker would make it); every other
test is a unit of its own, handed out in collection order as under ``--dist load``.

Builds are cached under ``.cache/cuda-agent-tests`` in the repository (or wherever
``CUDA_AGENT_CACHE`` points), so repeated runs skip compiler work; tests that need a cold build
use sources nobody compiled before.

Tiers: ``make test`` runs ``-m "not slow and not gpu"``, ``make test-all`` everything without
``gpu``. A test of the fast tier that ran long is named at the end of the run (a hint to mark it
``slow``, never a failure: speed is not asserted by tests).

With ``CUDA_AGENT_TEST_TIMELINE=DIR`` each pytest process writes when each of its tests started
and ended (``DIR/timeline-PID.jsonl``): ``benchmarks/ci_cpu_profile.py`` joins it with a
``perf record`` of the run to give each test's CPU.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
LONG_FAST_TEST_S = 20.0  # a fast-tier test that took longer is listed in the summary
# a folder: each test's start, end and pytest process, for benchmarks/ci_cpu_profile.py
TIMELINE_ENV = "CUDA_AGENT_TEST_TIMELINE"
_long_fast_tests: list[tuple[float, str]] = []
os.environ.setdefault("CUDA_AGENT_CACHE", str(REPO / ".cache" / "cuda-agent-tests"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under pytest-xdist (`-n auto`: a worker per core), one torch (OpenMP) thread per process
    # unless the caller says otherwise: a model or a compile in each worker with torch's default
    # of a thread per core oversubscribes the cores, and OpenMP's spinning threads burn the CPU
    # the other worker needs (a SmolLM2 GRPO step beside other tests: 194 s wall and 90 s of CPU
    # with the default, 88 s and 37 s with one thread). Evaluation workers set their own count;
    # a run without xdist (the GPU tier) keeps torch's default.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


def _workers_under_confine() -> None:
    """Evaluation workers under ``confine`` (Landlock and namespaces, no bubblewrap) where it
    isolates here and the caller chose no mode.

    Under ``confine`` a worker is forked from a template that has imported torch already (about
    0.2 s); bubblewrap starts every worker as a new process that imports torch (about 3.5 s on
    the 2-core machine, once or more per evaluation, for hundreds of evaluations). bubblewrap's
    own behaviour is tested where it differs, with the mode named: the isolation attacks, the
    fast tier's red-team fixtures again under the other mode, run-time builds, spares and the
    shell sandbox. ``CUDA_AGENT_ISOLATION=bwrap make test-all`` runs every test under it.
    """
    from tests.helpers import confine_available

    if "CUDA_AGENT_ISOLATION" not in os.environ and confine_available():
        os.environ["CUDA_AGENT_ISOLATION"] = "confine"


_workers_under_confine()


def pytest_report_header(config: pytest.Config) -> str:
    mode = os.environ.get("CUDA_AGENT_ISOLATION", "auto")
    return f"evaluation workers: CUDA_AGENT_ISOLATION={mode}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _slow_first(items)
    if os.environ.get("CUDA_AGENT_GPU_TESTS") == "1":
        return
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# xdist groups handed out before the other slow tests: the real-model trainings (minutes of
# Python and no compiler) start on one worker while the other builds the session's light
# header index and base headers, which every early compiling test waits for; with a compiling
# test first on both workers, one of them waited on the other's lock (about 15 s idle).
FIRST_GROUPS = ("real_models",)


def _slow_first(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first (those of ``FIRST_GROUPS`` before the rest), each group in
    its collection order (a stable sort).

    pytest-xdist hands out tests (an xdist group: where its first test is) in collection order,
    so the one- to four-minute tests start at once on every worker and the short ones fill in
    after them, instead of a long test starting last on one worker while the others idle
    (longest first: the classic balance).
    """
    items.sort(key=lambda item: ("slow" not in item.keywords, _group(item) not in FIRST_GROUPS))


def _group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    slow = "slow" in report.keywords
    if report.when == "call" and not slow and report.duration > LONG_FAST_TEST_S:
        _long_fast_tests.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _long_fast_tests:
        return
    terminalreporter.write_sep("-", f"tests not marked slow that took over {LONG_FAST_TEST_S} s")
    for seconds, nodeid in sorted(_long_fast_tests, reverse=True):
        terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With ``CUDA_AGENT_TEST_TIMELINE`` set, one line per test (its id, this process, its
    start and end on ``CLOCK_MONOTONIC``, the clock ``perf record -k CLOCK_MONOTONIC`` uses)
    in ``timeline-PID.jsonl`` there: ``benchmarks/ci_cpu_profile.py`` credits perf's samples
    to tests with it."""
    folder = os.environ.get(TIMELINE_ENV)
    start = time.clock_gettime(time.CLOCK_MONOTONIC)
    yield
    if folder:
        end = time.clock_gettime(time.CLOCK_MONOTONIC)
        line = {"id": item.nodeid, "pid": os.getpid(), "start": start, "end": end}
        with open(Path(folder) / f"timeline-{os.getpid()}.jsonl", "a") as timeline:
            timeline.write(json.dumps(line) + "\n")
