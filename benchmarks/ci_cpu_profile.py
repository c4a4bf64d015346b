"""Where a test run's CPU goes, test by test: perf's system-wide samples joined with pytest's
timeline (Linux, ``perf``, root or ``perf_event_paranoid`` <= 0).

Issue 49 (CI in twenty minutes on two cores) needs each test's CPU, not only its wall time:
two pytest workers share two cores, so a test's wall says little about what it costs, and
most of its CPU is spent in processes it starts (compilers, CLI commands, worker templates,
model training). Record a run with every process's forks and execs and a low-rate CPU sample,
with the tests' timeline on (``tests/conftest.py`` writes each test's start, end and pytest
process when ``CUDA_AGENT_TEST_TIMELINE`` names a folder)::

    mkdir -p /tmp/timeline
    perf record -k CLOCK_MONOTONIC -a -e cpu-clock/freq=49/ \\
        -e sched:sched_process_fork -e sched:sched_process_exec -o /tmp/run.data -- \\
        env CUDA_AGENT_TEST_TIMELINE=/tmp/timeline bash .ci/run
    python benchmarks/ci_cpu_profile.py /tmp/run.data /tmp/timeline

A sample is credited to the test that its process's pytest worker was running at that moment:
the process's ancestry comes from the fork events (threads included), so a compiler started
by a build thread of a CLI command started by the test counts for the test. Samples on an
idle CPU are ``idle``; samples of processes outside any pytest worker (pip, mypy, the pytest
controller) are listed by command. Each test's CPU is split by the kind of process (the
compiler's name, ``worker`` for the pytest worker itself, else the executable's name).

What it does not do: see a process whose fork event perf lost (it is counted by command
instead), or tell apart two tests of one pytest worker (they run one after another). At 49
samples a second per CPU, a figure under a second is noise. The frequency applies to the CPU
samples only: the fork and exec events are all recorded (``-F 49`` would sample those too and
lose most of the ancestry).
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_HZ = 49
COMPILERS = ("cc1plus", "cc1", "cicc", "cudafe++", "ptxas", "ld", "as", "nvcc", "g++", "pip")
LINE = re.compile(
    r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)\s+(?P<time>[\d.]+):\s+(?P<event>\S+):(?P<rest>.*)$"
)
FORK = re.compile(r"sched_process_fork: comm=.* pid=(\d+) child_comm=.* child_pid=(\d+)")
EXEC = re.compile(r"sched_process_exec: filename=(\S+) pid=(\d+)")
BETWEEN = "(between tests)"


@dataclass(frozen=True)
class RunSpan:
    """One test as a pytest process ran it (``CLOCK_MONOTONIC`` seconds)."""

    nodeid: str
    pid: int
    start: float
    end: float


@dataclass
class Profile:
    """CPU samples credited to tests (by kind of process) and, outside tests, to commands."""

    by_test: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    outside: Counter[str] = field(default_factory=Counter)
    idle: int = 0
    wall: dict[str, float] = field(default_factory=dict)

    def seconds(self, samples: int) -> float:
        return samples / SAMPLE_HZ


def read_timeline(folder: Path) -> list[RunSpan]:
    """Every ``timeline-PID.jsonl`` line of the folder (``tests/conftest.py`` writes them)."""
    spans = []
    for path in sorted(folder.glob("timeline-*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            spans.append(RunSpan(row["id"], int(row["pid"]), row["start"], row["end"]))
    return spans


def perf_lines(data: Path) -> Iterable[str]:
    """``perf script``'s lines for the recorded file (command, pid, time, event, details)."""
    command = ["perf", "script", "-i", str(data), "-F", "comm,pid,time,event,trace"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        yield from proc.stdout


def attribute(lines: Iterable[str], spans: list[RunSpan]) -> Profile:
    """Credit each CPU sample of ``lines`` (``perf script`` output) to a test of ``spans``."""
    runs: dict[int, list[RunSpan]] = defaultdict(list)
    for span in spans:
        runs[span.pid].append(span)
    for pid in runs:
        runs[pid].sort(key=lambda span: span.start)
    starts = {pid: [span.start for span in run] for pid, run in runs.items()}
    parent: dict[int, int] = {}
    program: dict[int, str] = {}
    profile = Profile(wall={span.nodeid: span.end - span.start for span in spans})
    owner_cache: dict[int, int | None] = {}

    def pytest_owner(pid: int) -> int | None:
        if pid in owner_cache:
            return owner_cache[pid]
        chain, current, owner = [], pid, None
        while current and len(chain) < 256:
            if current in runs:
                owner = current
                break
            chain.append(current)
            current = parent.get(current, 0)
        for seen in chain:
            owner_cache[seen] = owner
        return owner

    for line in lines:
        match = LINE.match(line)
        if match is None:
            continue
        event, pid = match["event"], int(match["pid"])
        if event.startswith("sched:sched_process_fork"):
            fork = FORK.search(line)
            if fork:
                parent.setdefault(int(fork[2]), int(fork[1]))
                owner_cache.pop(int(fork[2]), None)
            continue
        if event.startswith("sched:sched_process_exec"):
            found = EXEC.search(line)
            if found:
                program[int(found[2])] = found[1].rsplit("/", 1)[-1]
            continue
        comm = match["comm"]
        if comm == "swapper":
            profile.idle += 1
            continue
        owner = pytest_owner(pid)
        if owner is None:
            profile.outside[comm] += 1
            continue
        when = float(match["time"])
        index = bisect.bisect_right(starts[owner], when) - 1
        span = runs[owner][index] if index >= 0 else None
        test = span.nodeid if span is not None and when <= span.end else BETWEEN
        kind = comm if comm in COMPILERS else "worker" if pid == owner else program.get(pid, comm)
        profile.by_test[test][kind] += 1
    return profile


def report(profile: Profile, tests: int, files: int) -> str:
    """The tables: totals, CPU by test file, the costliest tests with their wall and kinds."""
    seconds = profile.seconds
    credited = sum(sum(kinds.values()) for kinds in profile.by_test.values())
    outside = sum(profile.outside.values())
    named = ", ".join(f"{name} {seconds(n):.0f}" for name, n in profile.outside.most_common(8))
    lines = [
        f"CPU seconds credited to tests: {seconds(credited):.0f}; idle: "
        f"{seconds(profile.idle):.0f}; outside tests: {seconds(outside):.0f} ({named})"
    ]
    kinds: Counter[str] = Counter()
    by_file: Counter[str] = Counter()
    for test, counts in profile.by_test.items():
        kinds.update(counts)
        by_file[test.split("::", 1)[0]] += sum(counts.values())
    lines.append("by kind of process: " + ", ".join(
        f"{kind} {seconds(n):.0f}" for kind, n in kinds.most_common(10)
    ))  # fmt: skip
    lines.append(f"\n{'cpu-s':>8}  test file")
    lines += [f"{seconds(n):8.1f}  {name}" for name, n in by_file.most_common(files)]
    lines.append(f"\n{'cpu-s':>8} {'wall-s':>7}  test (kinds of process, cpu-s)")
    ranked = sorted(profile.by_test.items(), key=lambda item: -sum(item[1].values()))
    for test, counts in ranked[:tests]:
        split = ", ".join(f"{kind} {seconds(n):.0f}" for kind, n in counts.most_common(4))
        wall = profile.wall.get(test, 0.0)
        lines.append(f"{seconds(sum(counts.values())):8.1f} {wall:7.1f}  {test}  ({split})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="perf.data, or perf script's text output")
    parser.add_argument("timeline", type=Path, help="the CUDA_AGENT_TEST_TIMELINE folder")
    parser.add_argument("--tests", type=int, default=40, help="how many tests to list")
    parser.add_argument("--files", type=int, default=30, help="how many test files to list")
    args = parser.parse_args(argv)
    spans = read_timeline(args.timeline)
    if not spans:
        print(f"error: no timeline-*.jsonl in {args.timeline}", file=sys.stderr)
        return 2
    if args.data.suffix == ".txt":
        with args.data.open() as text:
            profile = attribute(text, spans)
    else:
        profile = attribute(perf_lines(args.data), spans)
    print(report(profile, args.tests, args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
