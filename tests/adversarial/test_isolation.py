"""The four isolation attacks (write outside, forge a baseline, replace a cached module, open a
connection) under every isolation mode this machine offers, plus the unsandboxed mode, which
must be asked for and then still catches forged caches by their signatures.

Each test uses its own cache folder: the attacks rewrite what they find there. Only the
session's header index, precompiled headers and compiled objects are shared into it (built
once, not per test); its modules and baselines, which the attacks target, are its own.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.core.paths import baselines_dir, builds_dir
from cuda_agent.core.types import EvalResult
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from cuda_agent.workspace.isolation import (
    ALLOW_UNSANDBOXED_ENV,
    ISOLATION_ENV,
    IsolationUnavailable,
    bwrap_usable,
)
from tests.adversarial.catalogue import FIXTURES
from tests.helpers import confine_available, fast_options, relu_solution
from tests.warm_cache import fresh_cache

pytestmark = pytest.mark.slow


ISOLATED = [
    pytest.param(
        "bwrap", id="bwrap", marks=pytest.mark.skipif(not bwrap_usable(), reason="no bwrap")
    ),
    pytest.param(
        "confine",
        id="confine",
        marks=pytest.mark.skipif(not confine_available(), reason="no Landlock, not root"),
    ),
]


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache the sandbox user can reach (pytest's tmp_path sits in a 0700 folder), with
    its own key, extensions and baselines; the header index, precompiled headers and objects
    are the session's (``tests/warm_cache.py``), which no attack here targets."""
    folder = fresh_cache(monkeypatch)
    monkeypatch.delenv(ALLOW_UNSANDBOXED_ENV, raising=False)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _evaluate(path: Path, **options: object) -> EvalResult:
    return evaluate(resolve_problem("relu", "small"), load_solution(path), fast_options(**options))


def _honest(tmp_path: Path) -> Path:
    return relu_solution(tmp_path, "return ops.relu_ok(x)", name="honest.py")


@pytest.mark.parametrize("mode", ISOLATED)
def test_writes_outside_fail(
    mode: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ISOLATION_ENV, mode)
    home = Path(os.path.expanduser("~"))
    targets = [
        baselines_dir() / "pwned.json",
        home / f".ca-adv-{os.getpid()}",
        Path("/tmp") / f"ca-adv-{os.getpid()}.txt",
        Path("/var/tmp") / f"ca-adv-{os.getpid()}.txt",
    ]
    monkeypatch.setenv("CUDA_AGENT_ADV_TARGETS", ":".join(str(t) for t in targets))
    result = _evaluate(FIXTURES / "c1_write_outside.py")
    assert result.details.isolation != "none"
    assert not result.correct and "load_failed" in result.flags, result.error
    for target in targets:
        assert not target.exists(), f"{target} was written under {result.details.isolation}"


@pytest.mark.parametrize("mode", ISOLATED)
def test_no_connection_leaves(mode: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ISOLATION_ENV, mode)
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
    monkeypatch.setenv("CUDA_AGENT_ADV_PORT", str(listener.getsockname()[1]))
    try:
        result = _evaluate(FIXTURES / "c1_network.py")
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()
    assert not accepted, f"a connection left the sandbox ({result.details.isolation})"
    assert not result.correct and "load_failed" in result.flags


def _baselines() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(baselines_dir().glob("*.json"))}


def _modules() -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted((builds_dir() / "ext").glob("*/*.so"))}


@pytest.mark.parametrize("mode", ISOLATED)
def test_cached_baselines_and_modules_cannot_be_replaced(
    mode: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ISOLATION_ENV, mode)
    honest = _honest(tmp_path)
    before = _evaluate(honest, baselines=("eager", "compile"))
    assert before.correct and before.speedup_compile, before.error
    cached_ratio = before.details.compile_baseline["ratio"]
    baselines, modules = _baselines(), _modules()
    assert baselines and modules
    for fixture in ("c1_forge_baselines", "c1_replace_module"):
        attacker = _evaluate(FIXTURES / f"{fixture}.py", baselines=("eager", "compile"))
        assert attacker.details.isolation != "none"
        assert _baselines() == baselines, f"{fixture} changed a cached baseline"
        now = _modules()
        assert {k: now.get(k) for k in modules} == modules, f"{fixture} changed a cached module"
        assert attacker.correct and attacker.speedup_compile is not None
        # The forgery multiplies the cached ratio by 20; the speed-up is credited from the
        # ratio the attacker's run used, so compare that, not a noisy CPU timing.
        used = attacker.details.compile_baseline
        assert used["ratio"] == cached_ratio, f"{fixture} was credited a forged baseline: {used}"
    after = _evaluate(honest, baselines=("eager", "compile"))
    assert after.correct and after.speedup_compile
    assert after.details.compile_baseline == {
        **before.details.compile_baseline,
        "cached": True,
    }


def test_unsandboxed_must_be_asked_for(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ISOLATION_ENV, "none")
    with pytest.raises(IsolationUnavailable, match="--allow-unsandboxed"):
        _evaluate(FIXTURES / "c1_forge_baselines.py")
    assert not (builds_dir() / "ext").exists(), "refused only after building the candidate"


def test_unsandboxed_forged_caches_are_caught_by_their_signatures(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no isolation the attacks succeed in writing; the signatures make them useless: a
    forged baseline is measured again, a replaced module is rebuilt."""
    monkeypatch.setenv(ISOLATION_ENV, "none")
    honest = _honest(tmp_path)
    before = _evaluate(honest, baselines=("eager", "compile"), allow_unsandboxed=True)
    assert before.details.isolation == "none"
    assert before.correct and before.speedup_compile, before.error
    baselines, modules = _baselines(), _modules()

    forger = _evaluate(
        FIXTURES / "c1_forge_baselines.py", baselines=("eager", "compile"), allow_unsandboxed=True
    )
    assert _baselines() != baselines, "the forger did not run (nothing to prove)"
    assert forger.correct and forger.speedup_compile is not None
    # Credited from a fresh measurement, never from the forged (20x) entry: compare the ratio
    # used, not a noisy CPU timing.
    used = forger.details.compile_baseline
    assert used["cached"] is False, f"the forger was credited its forged baseline: {used}"
    forged_ratio = 20 * before.details.compile_baseline["ratio"]
    assert used["ratio"] != pytest.approx(forged_ratio, rel=1e-6), used
    assert any("integrity check" in w for w in forger.warnings), forger.warnings

    replacer = _evaluate(
        FIXTURES / "c1_replace_module.py", baselines=("eager",), allow_unsandboxed=True
    )
    assert replacer.correct
    now = _modules()
    assert {k: now.get(k) for k in modules} != modules, "the replacer did not run"

    after = _evaluate(honest, baselines=("eager", "compile"), allow_unsandboxed=True)
    assert after.correct, after.error
    assert after.builds[0]["cached"] is False  # rebuilt: the module was replaced
    assert after.details.compile_baseline == {**used, "cached": True}
    stored = json.loads(next(iter(baselines_dir().glob("*.json"))).read_text())
    assert stored["ratio"] == pytest.approx(after.compile_us / after.eager_us, rel=1e-6)


def test_commands_refuse_without_isolation_and_say_how(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    env = {**os.environ, ISOLATION_ENV: "none"}
    env.pop(ALLOW_UNSANDBOXED_ENV, None)
    honest = _honest(tmp_path)
    for argv in (
        ["eval", "relu", str(honest), "--backend", "cpu", "--baselines", "eager"],
        [
            "bench",
            "run",
            "--backend",
            "cpu",
            "--solutions",
            str(tmp_path),
            "--out",
            str(tmp_path / "run"),
        ],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "cuda_agent", *argv],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert proc.returncode == 2, (argv, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "--allow-unsandboxed" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()
