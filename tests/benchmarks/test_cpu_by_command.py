"""benchmarks/cpu_by_command.py watching a real process tree: a child that spins on the CPU
until the parent stops it is credited to its own label; processes older than the watch are not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.cpu_by_command import Seen, label_for, sample

ROOT = Path(__file__).resolve().parents[2]

# the parent starts a spinning child (a script named spin.py), waits until the child has used
# 2 s of CPU (its own /proc record, not a clock; the watcher starts well within it), then
# stops it and ends
PARENT = """
import subprocess, sys, os, time
child = subprocess.Popen([sys.executable, sys.argv[1]])
tick = os.sysconf("SC_CLK_TCK")
while True:
    fields = open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()
    if (int(fields[11]) + int(fields[12])) / tick >= 2.0:
        break
    time.sleep(0.05)
child.kill(); child.wait()
"""


def test_a_spinning_child_is_credited_to_its_script(tmp_path: Path) -> None:
    spin = tmp_path / "spin.py"
    spin.write_text("while True:\n    pass\n")
    out = tmp_path / "cpu.json"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(spin)])
    watch = [sys.executable, "benchmarks/cpu_by_command.py", "--pid", str(parent.pid)]
    done = subprocess.run(
        [*watch, "--interval", "0.05", "--out", str(out)], cwd=ROOT, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    parent.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    table = json.loads(out.read_text())["by_label"]
    assert table["spin.py"]["processes"] == 1 and table["spin.py"]["cpu_s"] >= 1.0, table
    assert "spin.py" in done.stdout and "total seen" in done.stdout


def test_labels_name_the_module_the_script_or_the_executable() -> None:
    assert label_for(["/usr/bin/python3", "-m", "cuda_agent.evaluator.worker"], "p") == (
        "cuda_agent.evaluator.worker"
    )
    assert label_for(["python3.11", "-u", "/x/spin.py", "arg"], "p") == "spin.py"
    assert label_for(["/usr/lib/gcc/cc1plus", "-quiet"], "cc1plus") == "cc1plus"
    assert label_for(["python", "-c", "import execnet; ..."], "p") == "pytest (xdist worker)"
    assert label_for([], "kworker") == "kworker"


def test_an_unknown_pid_is_a_clear_error() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/cpu_by_command.py", "--pid", "999999999"], cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "no such process" in done.stderr


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2]


def test_an_ended_process_keeps_the_label_of_its_command_line(tmp_path: Path) -> None:
    """A zombie's command line reads empty: its label stays the one it had while it ran."""
    spin = tmp_path / "spin.py"
    spin.write_text("while True:\n    pass\n")
    child = subprocess.Popen([sys.executable, str(spin)])
    try:
        seen = Seen(os.getpid())
        while not any(label == "spin.py" for label in seen.label.values()):
            sample(seen)  # until the child has exec'd into the script
        os.kill(child.pid, signal.SIGKILL)
        while _state(child.pid) != "Z":  # ended, not yet waited for
            pass
        assert Path(f"/proc/{child.pid}/cmdline").read_bytes() == b""
        sample(seen)
        labels = [label for (pid, _), label in seen.label.items() if pid == child.pid]
        assert labels == ["spin.py"], labels
    finally:
        child.kill()
        child.wait()
