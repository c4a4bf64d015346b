"""benchmarks/ci_cpu_profile.py credits perf's samples to the test whose pytest process started
the sampled process, through forks from threads and execs; the timeline it reads is the one
``tests/conftest.py`` writes for a real pytest run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.ci_cpu_profile import BETWEEN, RunSpan, attribute, read_timeline, report

ROOT = Path(__file__).resolve().parents[2]

# pytest process 100 runs test a (10-20 s) then test b (20-30 s); its thread 101 starts a
# command 200 (python3), whose compiler 300 runs during test a; pip (900) is nobody's child
PERF_SCRIPT = """\
python3 100 10.500: sched:sched_process_fork: comm=python3 pid=100 child_comm=python3 child_pid=101
python3 101 11.000: sched:sched_process_fork: comm=python3 pid=101 child_comm=python3 child_pid=200
python3 200 11.001: sched:sched_process_exec: filename=/venv/bin/python3 pid=200 old_pid=200
python3 200 11.500: sched:sched_process_fork: comm=python3 pid=200 child_comm=python3 child_pid=300
cc1plus 300 11.600: sched:sched_process_exec: filename=/usr/lib/gcc/cc1plus pid=300 old_pid=300
cc1plus 300 15.000: cpu-clock/freq=49/:
cc1plus 300 15.020: cpu-clock/freq=49/:
python3 200 25.000: cpu-clock/freq=49/:
python3 100 12.000: cpu-clock/freq=49/:
python3 100 35.000: cpu-clock/freq=49/:
swapper 0 13.000: cpu-clock/freq=49/:
pip 900 14.000: cpu-clock/freq=49/:
"""
SPANS = [RunSpan("t.py::a", 100, 10.0, 20.0), RunSpan("t.py::b", 100, 20.0, 30.0)]


def test_samples_are_credited_through_threads_and_execs() -> None:
    profile = attribute(PERF_SCRIPT.splitlines(), SPANS)
    assert profile.by_test["t.py::a"] == {"cc1plus": 2, "worker": 1}
    assert profile.by_test["t.py::b"] == {"python3": 1}  # the command, by its executable
    assert profile.by_test[BETWEEN] == {"worker": 1}  # after the last test ended
    assert profile.idle == 1 and profile.outside == {"pip": 1}
    text = report(profile, tests=5, files=5)
    assert text.index("t.py::a") < text.index("t.py::b")  # the costlier first


def test_the_conftest_writes_each_tests_span_for_it(tmp_path: Path) -> None:
    timeline = tmp_path / "timeline"
    timeline.mkdir()
    env = {**os.environ, "CUDA_AGENT_TEST_TIMELINE": str(timeline)}
    env.pop("PYTEST_XDIST_WORKER", None)
    test = (
        "tests/core/test_startup.py::"
        "test_the_collector_is_off_inside_then_on_with_the_imports_frozen"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    spans = read_timeline(timeline)
    assert [span.nodeid for span in spans] == [test]
    (span,) = spans
    assert span.start < span.end and span.pid != os.getpid()
    assert json.loads((timeline / f"timeline-{span.pid}.jsonl").read_text())["id"] == span.nodeid
