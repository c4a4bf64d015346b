"""Every red-team fixture on the cpu backend, with its required verdict (see catalogue.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.core.paths import baselines_dir
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate, prepare
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.isolation import IsolationUnavailable, bwrap_usable
from cuda_agent.workspace.sandbox import worker_isolation
from tests.adversarial.catalogue import (
    CATALOGUE,
    Fixture,
    cheap_fixture_names,
    shared_build_groups,
)
from tests.helpers import fast_options, relu_solution


def _isolated() -> bool:
    try:
        return worker_isolation(gpu=False) != "none"
    except IsolationUnavailable:
        return False


def params() -> list[object]:
    out = []
    isolated = _isolated()
    cheap = cheap_fixture_names()
    groups = shared_build_groups()
    for fixture in CATALOGUE:
        marks = [] if fixture.name in cheap else [pytest.mark.slow]
        if fixture.name in groups:
            marks.append(pytest.mark.xdist_group(groups[fixture.name]))
        if fixture.needs_sandbox and not isolated:
            marks.append(pytest.mark.skip(reason="no isolation here (see test_isolation.py)"))
        if fixture.needs_triton and importlib.util.find_spec("triton") is None:
            marks.append(pytest.mark.skip(reason="triton is not installed (pip install triton)"))
        if fixture.known_gap:
            marks.append(pytest.mark.xfail(reason=fixture.known_gap, strict=True))
        out.append(pytest.param(fixture, id=fixture.name, marks=marks))
    return out


@pytest.fixture(scope="module", autouse=True)
def shared_extension() -> None:
    """The extension most fixtures share, built (or found in the cache) before the first of
    them runs: in set-up, so each fixture's call time is its own verdict's, not the cold build
    of whichever fixture came first (the tier report once named ``a2_zeros`` at 53 s for it)."""
    cheap = cheap_fixture_names()
    first = next(f for f in CATALOGUE if f.name in cheap)
    prepared = prepare(
        resolve_problem(first.problem, "small"),
        load_solution(first.path),
        fast_options(**first.options),
    )
    assert prepared.error is None, prepared.error


def run(fixture: Fixture):
    opts = fast_options(**fixture.options)
    return evaluate(resolve_problem(fixture.problem, "small"), load_solution(fixture.path), opts)


class Listener:
    """A local server that no sandboxed candidate should reach (connections are counted)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(1)
        self.socket.settimeout(0.2)
        self.accepted: list[object] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                self.accepted.append(self.socket.accept())
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=2)
        self.socket.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    """One listener and one set of target paths for the whole module (the workers'
    environment names them, under our own prefix: workers whose environments differ only in
    ``CUDA_AGENT_*`` variables are forked from one template, ``worker_spawn._template_key``)."""
    server = Listener()
    targets = [baselines_dir() / "pwned.json", Path("/var/tmp") / f"ca-adv-{os.getpid()}.txt"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_AGENT_ADV_TARGETS", ":".join(str(t) for t in targets))
        patch.setenv("CUDA_AGENT_ADV_PORT", str(server.port))
        # f_fork_children's sleepers: an argument no other process on the machine uses (another
        # test process, a second test run), so the survivors' search finds only its own
        patch.setenv("CUDA_AGENT_ADV_SLEEP", f"600.{os.getpid()}")
        yield server
    server.close()


@pytest.mark.parametrize("fixture", params())
def test_fixture_gets_its_required_verdict(fixture: Fixture, listener: Listener) -> None:
    check_verdict(fixture, listener)


def _other_mode() -> tuple[str, str | None]:
    """The isolation mode the variant below runs under (the one the session's workers do not
    use), and why it cannot run here (None: it runs)."""
    try:
        default = worker_isolation(gpu=False)
    except IsolationUnavailable:
        return "", "no isolation here"
    other = "confine" if default == "bwrap" else "bwrap"
    if other == "bwrap" and not bwrap_usable():
        return other, f"workers here confine themselves ({default}) and bubblewrap is not usable"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CUDA_AGENT_ISOLATION", other)
        try:
            named = worker_isolation(gpu=False)
        except IsolationUnavailable:
            return other, f"no {other} isolation here"
    return other, None if named != "none" else f"no {other} isolation here"


# the fast tier's fixtures, and one that the memory check rejects: its AddressSanitizer worker
# starts as a process of its own in either mode, and must see the instrumented build there
OTHER_MODE_FIXTURES = cheap_fixture_names() | {"m1_read_past_end"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "fixture", [f for f in CATALOGUE if f.name in OTHER_MODE_FIXTURES], ids=lambda f: f.name
)
def test_fixture_verdict_under_the_other_isolation_mode(
    fixture: Fixture, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixtures again under the isolation mode the session's workers do not use:
    bubblewrap (a worker started as its own process, in its own mount namespace) where the
    tests run under ``confine`` (tests/conftest.py), else ``confine`` (a worker forked from the
    template, as a GPU pod's are), with the same required verdicts."""
    mode, reason = _other_mode()
    if reason:
        pytest.skip(reason)
    if fixture.needs_triton and importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed (pip install triton)")
    if fixture.known_gap:
        pytest.xfail(fixture.known_gap)
    monkeypatch.setenv("CUDA_AGENT_ISOLATION", mode)
    check_verdict(fixture, listener)


def check_verdict(fixture: Fixture, listener: Listener) -> None:
    targets = [Path(t) for t in os.environ["CUDA_AGENT_ADV_TARGETS"].split(":")]
    connections = len(listener.accepted)
    result = run(fixture)

    if fixture.expect == "scored":
        assert result.correct, (result.error, result.flags)
        assert result.flags == [] and result.reward >= 1
    else:
        assert result.reward == -1.0 and not result.correct
        assert set(fixture.flags) & set(result.flags), (result.flags, result.error)
        assert result.error is not None and result.error.message
        assert fixture.message_has in result.error.message, result.error.message
        if fixture.stage:
            assert result.error.stage == fixture.stage, (result.error.stage, result.flags)
    notes = result.shown_details().get("notes", [])
    assert set(fixture.notes) <= set(notes), (notes, result.warnings)
    assert len(listener.accepted) == connections, "a connection left the sandbox"
    for target in targets:
        assert not target.exists(), f"{target} was written"
    if fixture.name == "f_fork_children":
        survivors = subprocess.run(
            ["pgrep", "-fx", re.escape(f"sleep {os.environ['CUDA_AGENT_ADV_SLEEP']}")],
            capture_output=True,
            text=True,
        ).stdout
        assert survivors == ""
    if fixture.name == "f_slow_correct_kernel":  # the budget stopped it, not the timeout
        assert "timeout" not in result.flags
        assert result.details.device_budget_s < 10  # the rule x0.1 (about 5 s), not the minute
        assert fast_options(**fixture.options).worker_timeout_s == 600.0
        assert EvalOptions().worker_timeout_s == 600.0  # the default timeout was in force
    if fixture.name == "f_compile_log_flood":
        assert result.error is not None and len(result.error.message) < 5000
    if fixture.name == "f_huge_stdout":
        assert len(result.details.candidate_stdout_tail or "") < 5000


@pytest.mark.slow
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
