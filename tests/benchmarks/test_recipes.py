"""The GPU recipes in benchmarks/recipes/: each parses, shares common.sh, and the docs and the
recipes name each other.

What it checks: every recipe passes ``bash -n``; every recipe but common.sh sources common.sh;
every ``benchmarks/recipes/X.sh`` that README.md or docs/*.md names exists; every recipe is
named in docs/benchmarks.md; every stage the docs name exists; no recipe's text holds a date or
an issue number (recipes are named after measurements, the history lives in
docs/benchmarks-log.md); the shared helpers run (the chunked carry round trip, the time limit,
the row printed last); no recipe waits for all of its children (a bare ``wait`` also waits for
the heartbeat that ``recipe_start`` starts, which never ends: the parity recipe hung so until
its call was killed, its table unprinted); ``detached`` starts a command once, in a session of
its own that outlives the recipe's (the parity runs go on across a lease's calls). What it does
not check: that a recipe's measurement runs (that needs the device machine).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "benchmarks" / "recipes"
COMMON = RECIPES / "common.sh"
SCRIPTS = sorted(RECIPES.glob("*.sh"))
RECIPE_SCRIPTS = [s for s in SCRIPTS if s != COMMON]
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SOURCE_LINE = '. "$(dirname "$0")/common.sh"'
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
ISSUE = re.compile(r"\bissues?[ -]#?\d+|#\d{2,}\b", re.I)


def ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_there_are_recipes() -> None:
    assert COMMON.exists()
    assert len(SCRIPTS) >= 20
    assert not (REPO / "benchmarks" / "gpu_suite.sh").exists()


@pytest.mark.parametrize("script", SCRIPTS, ids=ids(SCRIPTS))
def test_each_recipe_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", RECIPE_SCRIPTS, ids=ids(RECIPE_SCRIPTS))
def test_each_recipe_sources_common(script: Path) -> None:
    lines = script.read_text(encoding="utf-8").splitlines()
    assert SOURCE_LINE in lines, f"{script.name} does not source common.sh"


@pytest.mark.parametrize("script", RECIPE_SCRIPTS, ids=ids(RECIPE_SCRIPTS))
def test_no_recipe_waits_for_the_heartbeat(script: Path) -> None:
    bare = [
        n
        for n, line in enumerate(script.read_text(encoding="utf-8").splitlines(), 1)
        if re.fullmatch(r"\s*wait\s*(;.*|#.*)?", line)
    ]
    assert not bare, f"{script.name}: a bare `wait` (name the pids) on line(s) {bare}"


@pytest.mark.parametrize("script", SCRIPTS, ids=ids(SCRIPTS))
def test_no_recipe_names_a_date_or_an_issue(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    found = DATE.findall(text) + ISSUE.findall(text)
    assert not found, f"{script.name}: {found}"


def test_every_recipe_the_docs_name_exists() -> None:
    named = {
        (doc.name, m[1])
        for doc in DOCS
        for m in re.finditer(r"benchmarks/recipes/([a-z0-9_]+\.sh)", doc.read_text("utf-8"))
    }
    missing = sorted(f"{doc}: {name}" for doc, name in named if not (RECIPES / name).exists())
    assert not missing, missing


def stages(script: Path) -> set[str]:
    """The labels of a recipe's ``case`` (``a|b)`` at a line's start), as the docs' test reads."""
    text = script.read_text(encoding="utf-8")
    return {x for m in re.finditer(r"^\s*([A-Za-z0-9_|-]+)\)", text, re.M) for x in m[1].split("|")}


def test_every_stage_the_docs_name_exists() -> None:
    """Tables and prose too (the docs' command test reads fenced blocks alone)."""
    wrong = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"bash benchmarks/recipes/([a-z0-9_]+\.sh) ([a-z][a-z0-9_-]*)", text):
            script = RECIPES / m[1]
            labels = stages(script) if script.exists() else set()
            if labels and m[2] not in labels:
                wrong.append(f"{doc.name}: {m[1]} {m[2]}")
    assert not wrong, wrong


@pytest.mark.parametrize("script", RECIPE_SCRIPTS, ids=ids(RECIPE_SCRIPTS))
def test_every_recipe_is_named_in_benchmarks_md(script: Path) -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert f"bash benchmarks/recipes/{script.name}" in text


def run_with_common(body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = f"set -u\n. {COMMON}\n{body}\n"
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "HOME": str(tmp_path)},
    )


def test_common_limits_a_step_and_prints_the_row_last(tmp_path: Path) -> None:
    done = run_with_common(
        'RECIPE_END=$(($(date +%s) + 2)); recipe_start; limit 60 sleep 30; echo "rc $?"\n'
        'printf "a  b\\nc\\n" | joined; row "figure:" 42',
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "rc 124" in lines  # cut at RECIPE_END (at least 5 s), not after 60 s
    assert "a b ; c" in lines
    assert lines[-1] == "row: figure: 42"
    assert (tmp_path / "out").is_dir()


def test_common_carries_files_in_chunks(tmp_path: Path) -> None:
    payload = tmp_path / "x.whl"
    payload.write_bytes(bytes(range(256)) * 200)
    carry, store = tmp_path / "carry", tmp_path / "store"
    done = run_with_common(
        f"CHUNK_BYTES=20000; chunks_prepare {carry} {payload} >/dev/null\n"
        f"chunks_receive {carry} {store}\n"
        # pip stands aside: the join and the SHA-256 check are what is tested
        "python3() { echo pip; }\n"
        f"chunks_install {store}\n"
        f"echo 0 >> {store}/chunk-00; chunks_install {store} || echo 'check failed'",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    counts = re.search(r"here: (\d+) of (\d+)", done.stdout)
    assert counts and counts[1] == counts[2] and int(counts[1]) > 1, done.stdout
    assert "SHA-256 checked" in done.stdout
    assert done.stdout.rstrip().endswith("check failed")


def test_common_detached_outlives_its_recipe_and_starts_once(tmp_path: Path) -> None:
    """`detached` starts a command in a session of its own that survives the end of the
    recipe's process group (as the device kills what a call leaves running, new sessions
    excepted); a second call finds it running and starts nothing; `alive` tells the same
    process from a pid that was reused or a process that ended."""
    fifo, pidfile, log = tmp_path / "go", tmp_path / "side.pid", tmp_path / "side.log"
    os.mkfifo(fifo)
    # the command blocks until the test writes to the fifo, then says so and ends
    command = f'python3 -c \'open("{fifo}").read(); print("released")\''
    body = (
        f"detached {pidfile} {log} {command}\n"
        f"detached {pidfile} {log} {command}\n"
        f"alive {pidfile} && echo alive\n"
    )
    recipe = subprocess.Popen(
        ["bash", "-c", f"set -u\n. {COMMON}\n{body}"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), "HOME": str(tmp_path)},
    )
    out, _ = recipe.communicate(timeout=60)
    with contextlib.suppress(ProcessLookupError):  # the device kills what a call leaves
        os.killpg(recipe.pid, signal.SIGKILL)
    try:
        pid = int(pidfile.read_text().split()[0])
        assert "still running from an earlier call" in out and out.rstrip().endswith("alive"), out
        assert os.getsid(pid) == pid != recipe.pid  # a session of its own, so still running
        watch = os.pidfd_open(pid)
        try:
            with open(fifo, "w") as release:
                release.write("go")
            assert select.select([watch], [], [], 60)[0], "the detached command did not end"
        finally:
            os.close(watch)
    finally:  # none left behind when an assertion failed
        _kill_commands_naming(str(fifo))
    assert log.read_text().count("released") == 1  # started once
    assert run_with_common(f"alive {pidfile} || echo ended", tmp_path).stdout.strip() == "ended"
    # a pidfile naming a live process started at another time is not that process
    pidfile.write_text(f"{os.getpid()} 1\n")
    assert run_with_common(f"alive {pidfile} || echo other", tmp_path).stdout.strip() == "other"


def _kill_commands_naming(text: str) -> None:
    """SIGKILL every process whose command line holds ``text``."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if text in cmdline.read_bytes().decode(errors="replace"):
                os.kill(int(cmdline.parent.name), signal.SIGKILL)
