"""Where a long run's CPU time goes, by kind of process: sampled from ``/proc`` (Linux only).

Issue 49 (CI in twenty minutes on two cores) needs to know what the test suite's CPU is spent
on: the C++ compiler, nvcc, pip, the pytest workers, the evaluation workers, model training.
Run it beside the run to measure; it stops when the process it watches ends, or on Ctrl-C::

    python benchmarks/cpu_by_command.py --pid PID [--out FILE.json]

Every ``--interval`` seconds (0.5) it reads each process's cumulative user+system time
(``/proc/PID/stat``) and its command line; a process's time is the last value seen before it
ended, credited to a label (from the last command line seen, an ended process's empty one
aside): the executable's name (``cc1plus``, ``cicc``, ``ld``), or for Python the module after
``-m`` or the script's name (``cuda_agent.evaluator.worker``, ``pytest``, ``pip``), with an
xdist worker named ``pytest (xdist worker)``. Only the watched process and its descendants
count (found through their parents while those live: a process whose parent ended before it
was first seen is missed). The table, printed at the end (and written to ``--out``), gives
each label's CPU seconds, its share of what was seen, and how many processes had it.

What it does not see: a process that starts and ends between two samples (its time is lost;
compare the table's total with ``/usr/bin/time``'s user+sys for the coverage), and time spent
after the last sample of a process that was still running. It measures nothing about wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
PROGRESS_S = 15.0


Key = tuple[int, float]  # (pid, start tick): a pid can be used again, this pair cannot


@dataclass
class Seen:
    """Every process of the watched tree seen so far: its label and last cumulative CPU s."""

    root: int
    label: dict[Key, str] = field(default_factory=dict)
    cpu_s: dict[Key, float] = field(default_factory=dict)


def label_for(cmdline: list[str], comm: str) -> str:
    """A short name for what a process is (see the module docstring)."""
    if not cmdline:
        return comm
    exe = os.path.basename(cmdline[0])
    if not exe.startswith("python"):
        return exe or comm
    args = cmdline[1:]
    if "-m" in args and args.index("-m") + 1 < len(args):
        module = args[args.index("-m") + 1]
        return module
    if "-c" in args:
        code = args[args.index("-c") + 1] if args.index("-c") + 1 < len(args) else ""
        return "pytest (xdist worker)" if "execnet" in code else "python -c"
    scripts = [a for a in args if not a.startswith("-")]
    return os.path.basename(scripts[0]) if scripts else exe


@dataclass(frozen=True)
class Process:
    """One process as ``/proc`` shows it now."""

    key: Key
    parent: int
    comm: str
    cmdline: list[str]
    cpu_s: float
    state: str  # /proc's one-letter state: R running, S sleeping, Z ended but not waited for...


def _read_process(pid: int) -> Process | None:
    """``pid`` as ``/proc`` shows it, or None where it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    comm = stat[stat.index("(") + 1 : stat.rindex(")")]
    fields = stat[stat.rindex(")") + 2 :].split()
    utime, stime, started = int(fields[11]), int(fields[12]), float(fields[19])
    cmdline = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    cpu_s = (utime + stime) / TICKS
    return Process((pid, started), int(fields[1]), comm, cmdline, cpu_s, fields[0])


def _running(pid: int) -> bool:
    """Whether ``pid`` is alive (a zombie, ended but not yet waited for, is not)."""
    process = _read_process(pid)
    return process is not None and process.state != "Z"


def sample(seen: Seen) -> None:
    """One pass over ``/proc``: the CPU seconds so far of the watched process and of every
    process whose parent, grandparent or older ancestor is it (or was seen in its tree)."""
    now: dict[int, Process] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (process := _read_process(int(entry))) is not None:
            now[process.key[0]] = process
    for process in now.values():
        if _in_tree(process, now, seen):
            if process.cmdline or process.key not in seen.label:  # a zombie's is empty
                seen.label[process.key] = label_for(process.cmdline, process.comm)  # may exec
            seen.cpu_s[process.key] = process.cpu_s


def _in_tree(process: Process, now: dict[int, Process], seen: Seen) -> bool:
    """Whether ``process`` is the watched one or descends from it (by its live ancestors)."""
    hops = 0
    while hops < 64:  # a chain of parents; /proc can change between reads, so bounded
        if process.key[0] == seen.root or process.key in seen.cpu_s:
            return True
        parent = now.get(process.parent)
        if parent is None or parent.key[0] <= 1:
            return False
        process, hops = parent, hops + 1
    return False


def table(seen: Seen) -> dict[str, dict[str, float]]:
    """CPU seconds, share and process count by label, largest first."""
    by_label: dict[str, float] = {}
    count: Counter[str] = Counter()
    for key, cpu_s in seen.cpu_s.items():
        label = seen.label.get(key, "?")
        by_label[label] = by_label.get(label, 0.0) + cpu_s
        count[label] += 1
    total = sum(by_label.values()) or 1.0
    return {
        label: {"cpu_s": round(s, 1), "share": round(s / total, 3), "processes": count[label]}
        for label, s in sorted(by_label.items(), key=lambda item: -item[1])
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True, help="stop when this process ends")
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.interval <= 0:
        parser.error("--interval must be positive")
    if not Path(f"/proc/{args.pid}").exists():
        parser.error(f"--pid {args.pid}: no such process")
    seen = Seen(args.pid)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    began = last = time.monotonic()
    while not stop and _running(args.pid):
        sample(seen)
        now = time.monotonic()
        if now - last >= PROGRESS_S:
            seen_s = sum(seen.cpu_s.values())
            print(f"cpu_by_command: {now - began:.0f} s, {seen_s:.0f} CPU s seen", flush=True)
            last = now
        time.sleep(args.interval)
    result = table(seen)
    total = sum(row["cpu_s"] for row in result.values())
    print(f"{'label':<48} {'CPU s':>9} {'share':>6} {'procs':>6}")
    for label, row in list(result.items())[:40]:
        print(f"{label[:48]:<48} {row['cpu_s']:>9.1f} {row['share']:>6.1%} {row['processes']:>6}")
    print(f"{'total seen':<48} {total:>9.1f}")
    if args.out is not None:
        args.out.write_text(json.dumps({"total_cpu_s": total, "by_label": result}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
