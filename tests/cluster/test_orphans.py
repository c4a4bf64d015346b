"""The watcher of a pool actor kills the processes marked with its token once the actor's
end of the pipe closes (the actor died), and nothing else."""

from __future__ import annotations

import os
import subprocess

from cuda_agent.cluster.orphans import Watcher, marked


def sleeper(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "120"], env={**os.environ, **env}, start_new_session=True)


def test_the_watcher_kills_marked_processes_when_its_actor_goes() -> None:
    watcher = Watcher()
    mine = [sleeper(watcher.env), sleeper(watcher.env)]
    other = Watcher()
    theirs = sleeper(other.env)
    unmarked = sleeper({})
    try:
        assert sorted(marked(watcher.token)) == sorted(p.pid for p in mine)
        assert watcher.proc.poll() is None  # waits while the actor lives
        assert watcher.proc.stdin is not None
        watcher.proc.stdin.close()  # what the actor's death does
        assert watcher.proc.wait(timeout=120) == 0
        assert [p.wait(timeout=120) for p in mine] == [-9, -9]
        assert theirs.poll() is None and unmarked.poll() is None
        assert marked(watcher.token) == []
    finally:
        for proc in (theirs, unmarked, other.proc):
            proc.kill()
            proc.wait()
