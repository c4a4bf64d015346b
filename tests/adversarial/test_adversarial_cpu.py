"""Every red-team fixture on the cpu backend, with its required verdict (see catalogue.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from cuda_agent.core.paths import baselines_dir
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.sandbox import bwrap_usable
from tests.adversarial.catalogue import CATALOGUE, Fixture
from tests.helpers import fast_options, relu_solution

pytestmark = pytest.mark.slow


def params() -> list[object]:
    out = []
    for fixture in CATALOGUE:
        marks = []
        if fixture.needs_sandbox and not bwrap_usable():
            marks.append(pytest.mark.skip(reason="bubblewrap is not usable here"))
        if fixture.known_gap:
            marks.append(pytest.mark.xfail(reason=fixture.known_gap, strict=True))
        out.append(pytest.param(fixture, id=fixture.name, marks=marks))
    return out


def run(fixture: Fixture):
    opts = fast_options(**fixture.options)
    return evaluate(resolve_problem(fixture.problem, "small"), load_solution(fixture.path), opts)


@pytest.mark.parametrize("fixture", params())
def test_fixture_gets_its_required_verdict(
    fixture: Fixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    targets = [baselines_dir() / "pwned.json", Path("/var/tmp") / f"ca-adv-{os.getpid()}.txt"]
    monkeypatch.setenv("CA_ADV_TARGETS", ":".join(str(t) for t in targets))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    accepted: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    monkeypatch.setenv("CA_ADV_PORT", str(listener.getsockname()[1]))
    try:
        result = run(fixture)
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()

    if fixture.expect == "scored":
        assert result.correct, (result.error, result.flags)
        assert result.flags == [] and result.reward >= 1
    else:
        assert result.reward == -1.0 and not result.correct
        assert set(fixture.flags) & set(result.flags), (result.flags, result.error)
        assert result.error is not None and result.error.message
        assert fixture.message_has in result.error.message, result.error.message
    notes = result.details.get("notes", [])
    assert set(fixture.notes) <= set(notes), (notes, result.warnings)
    assert not accepted, "a connection left the sandbox"
    for target in targets:
        assert not target.exists(), f"{target} was written"
    if fixture.name == "f_fork_children":
        survivors = subprocess.run(
            ["pgrep", "-f", "sleep 600.25"], capture_output=True, text=True
        ).stdout
        assert survivors == ""
    if fixture.name == "f_compile_log_flood":
        assert result.error is not None and len(result.error.message) < 5000
    if fixture.name == "f_huge_stdout":
        assert len(result.details.get("candidate_stdout_tail", "")) < 5000


def test_after_the_faults_the_next_evaluation_is_right(tmp_path: Path) -> None:
    result = evaluate(
        resolve_problem("relu", "small"),
        load_solution(relu_solution(tmp_path, "return ops.relu_ok(x)")),
        fast_options(),
    )
    assert result.correct and result.flags == []


def test_every_fixture_file_is_catalogued() -> None:
    files = {p.stem for p in (Path(__file__).parent / "fixtures").glob("*.py")}
    assert files == {f.file for f in CATALOGUE}
    assert len({f.name for f in CATALOGUE}) == len(CATALOGUE)


def test_every_fixture_is_in_the_security_table() -> None:
    table = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    missing = [f.name for f in CATALOGUE if f"`{f.file}`" not in table]
    assert not missing
