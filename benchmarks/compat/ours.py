"""``ours``: our verdict on every solution of a prepared set, through ``cuda-agent bench run``.

The command is ``cuda-agent bench run --problems SET/problems --solutions SET/solutions
--policy kernelbench --baselines eager --backend B --out SET/ours`` (plus any extra arguments),
run as a child process, so this measures exactly what a user runs (its output goes to
``SET/<run>.log``; ``run`` names the run folder, ``ours`` by default, so that another policy
can be run beside it). ``bench run`` appends each
verdict as it finishes and a rerun skips what is done, so a call cut by its ``deadline`` (the
child is stopped with SIGINT, then killed) resumes in the next. Each call is one *segment*
appended to ``SET/<run>_segments.jsonl`` (start, end, exit status, verdicts before and after);
``summary`` adds them up: wall time over all segments, verdict counts, and the solutions with
no verdict yet (the issue-15 figure: every solution of a set with a verdict, and how long).
No segment starts with less than ``MIN_SEGMENT_S`` before the deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.compat.corpus import PROBLEMS, SOLUTIONS, read_manifest

from cuda_agent.bench.records import RESULTS_FILE, chosen_attempts, read_records
from cuda_agent.core.jsonl import append_line, read_lines

RUN = "ours"  # the run folder's name in the set (another for another policy)
GRACE_S = 20.0  # between SIGINT and SIGKILL at the deadline
MIN_SEGMENT_S = 30.0  # a segment shorter than this is not started


def segments_file(set_dir: Path, run: str) -> Path:
    return set_dir / f"{run}_segments.jsonl"


def bench_command(
    set_dir: Path,
    backend: str,
    policy: str,
    extra: list[str],
    run: str = RUN,
    python: str = sys.executable,
) -> list[str]:
    return [
        python,
        "-m",
        "cuda_agent",
        "bench",
        "run",
        "--problems",
        str(set_dir / PROBLEMS),
        "--solutions",
        str(set_dir / SOLUTIONS),
        "--policy",
        policy,
        "--baselines",
        "eager",
        "--backend",
        backend,
        "--out",
        str(set_dir / run),
        *extra,
    ]


def run_ours(
    set_dir: Path,
    backend: str = "cuda",
    policy: str = "kernelbench",
    deadline: float | None = None,
    extra: list[str] | None = None,
    run: str = RUN,
) -> dict[str, Any]:
    """One segment of ``bench run`` over the set (until done or the deadline); the summary."""
    read_manifest(set_dir)  # a prepared set, or one clear error
    if deadline is not None and deadline - time.time() < MIN_SEGMENT_S:
        return summary(set_dir, run)
    before = _verdicts(set_dir, run)
    command = bench_command(set_dir, backend, policy, extra or [], run)
    started = time.time()
    log_path = set_dir / f"{run}.log"
    with open(log_path, "a") as out:
        out.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(command)}\n")
        out.flush()
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        status = _wait(proc, deadline)
    ended = time.time()
    append_line(
        segments_file(set_dir, run),
        {
            "start": round(started, 2),
            "end": round(ended, 2),
            "seconds": round(ended - started, 2),
            "exit": status,
            "verdicts_before": before,
            "verdicts_after": _verdicts(set_dir, run),
            "command": command,
        },
    )
    return summary(set_dir, run)


def _wait(proc: subprocess.Popen[bytes], deadline: float | None) -> int | str:
    try:
        return proc.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return "deadline"


def _verdicts(set_dir: Path, run: str) -> int:
    folder = set_dir / run
    return (
        len({r.problem_id for r in read_records(folder)}) if (folder / RESULTS_FILE).exists() else 0
    )


def summary(set_dir: Path, run: str = RUN) -> dict[str, Any]:
    """Wall time (all segments), verdict counts and solutions left without a verdict."""
    manifest = read_manifest(set_dir)
    chosen = chosen_attempts(read_records(set_dir / run)) if (set_dir / run).exists() else {}
    segments = read_lines(segments_file(set_dir, run))
    verdicts: Counter[str] = Counter()
    flags: Counter[str] = Counter()
    for record in chosen.values():
        result = record.result
        stage = result.error.stage if result.error is not None else None
        verdicts["correct" if record.correct else f"rejected at {stage}"] += 1
        flags.update(str(f).split(":", 1)[0] for f in result.flags)
    missing = sorted(set(manifest["solutions"]) - set(chosen))
    return {
        "set": set_dir.name,
        "run": run,
        "solutions": len(manifest["solutions"]),
        "verdicts": len(chosen),
        "without_verdict": missing,
        "wall_s": round(sum(s.get("seconds", 0.0) for s in segments), 1),
        "segments": len(segments),
        "first_segment_s": segments[0]["seconds"] if segments else None,
        "counts": dict(verdicts.most_common()),
        "flags": dict(flags.most_common()),
    }
