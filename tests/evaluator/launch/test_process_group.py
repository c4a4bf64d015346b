"""kill_group_and_wait: when it returns, no member of the group runs any more."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from cuda_agent.evaluator.launch.process_group import group_members, kill_group_and_wait

# an argument no other process on the machine gives sleep (another test process, another run)
SLEEPERS = f"sleep 600.{os.getpid()}"

# a group leader that starts five sleepers in its own group, says so, and waits
LEADER = f"""
import os, subprocess, sys, time
for _ in range(5):
    subprocess.Popen({SLEEPERS.split()!r})
print("started", flush=True)
time.sleep(600)
"""


def _pgrep(command: str) -> str:
    """The pids whose whole command line is ``command``."""
    return subprocess.run(
        ["pgrep", "-fx", re.escape(command)], capture_output=True, text=True
    ).stdout


def test_no_member_runs_once_it_returns() -> None:
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert leader.stdout is not None and leader.stdout.readline().strip() == "started"
    assert len(group_members(leader.pid)) == 6
    left = kill_group_and_wait(leader.pid)
    assert left == []
    assert group_members(leader.pid) == []
    assert _pgrep(SLEEPERS) == ""
    leader.wait(timeout=120)


def test_an_empty_group_returns_at_once() -> None:
    done = subprocess.run([sys.executable, "-c", "pass"], start_new_session=True)
    assert done.returncode == 0
    # with a wait that would outlast the test's own timeout: only returning at once passes
    assert kill_group_and_wait(2**22 - 7, wait_s=10**6) == []


def test_zombies_count_as_gone() -> None:
    # the leader exits at once and stays a zombie until we reap it
    leader = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    deadline = time.monotonic() + 120
    while group_members(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert group_members(leader.pid) == []
    assert leader.poll() == 0
