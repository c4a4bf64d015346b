"""The memory check's cached answers (``evaluator/checks/memory_check_cache.py``): an answer
kept for a key is read back for that key only (another solution, problem, tolerance, device,
precision, backend or checker misses), a forged or replayed entry reads as None, and, end to end
on the cpu backend (AddressSanitizer), a repeated evaluation of the same solution reports the
cached answer with the same verdict while ``use_memory_check_cache=False`` checks it again.

Every test points ``CUDA_AGENT_CACHE`` at its own folder, so its answers start from none. The
unit tests have their own signing key too; the two end-to-end tests share the session cache's
builds, baselines and the key that signs them (links in their own folder): the example, the
fixture and their AddressSanitizer variants (and the light index and precompiled headers they
use) are compiled at most once for the session, where other tests may have built them already,
not again into every fresh folder. Whether an answer is cached depends on the
memory-check entries only, and those are the test's own.

What it does not check: the signature scheme itself (``core/secret.py``) or the GPU checker.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cuda_agent.core import secret
from cuda_agent.core.paths import baselines_dir, builds_dir, ensure_dir
from cuda_agent.core.types import Problem, Solution
from cuda_agent.evaluator.checks.memory_check_cache import (
    CheckKey,
    cached_answer,
    keep_answer,
    memory_checks_dir,
)
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.adversarial.catalogue import FIXTURES
from tests.helpers import fast_options

EXAMPLE = Path(__file__).resolve().parents[3] / "src" / "cuda_agent" / "examples" / "relu"
EXAMPLE_CPU = EXAMPLE / "cpu.py"
CLEAN: dict[str, Any] = {
    "tool": "AddressSanitizer",
    "scope": "the candidate's C++ code",
    "errors": 0,
    "findings": [],
    "output_ok": True,
    "output_message": "",
}
FOUND: dict[str, Any] = {
    **CLEAN,
    "errors": 1,
    "findings": ["heap-buffer-overflow READ of size 4 in relu_peek(at::Tensor)"],
    "output_ok": None,
}
CPU = {"backend": "cpu", "torch": "2.5.1", "device": "x86_64", "threads": 1}


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(root))
    return root


@pytest.fixture
def answers_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own (no memory-check answers yet) whose builds, baselines and
    signing key are the session's: the builds an earlier test made are not made again."""
    shared = {
        "builds": ensure_dir(builds_dir()),
        "baselines": ensure_dir(baselines_dir()),
        "secret": secret.secret_dir(),
    }
    secret.key()  # the session's key exists before it is linked to
    root = ensure_dir(tmp_path / "cache")
    for name, target in shared.items():
        (root / name).symlink_to(target, target_is_directory=True)
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(root))
    assert not memory_checks_dir().exists()
    return root


def solution(folder: Path, text: str) -> Solution:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "solution.py"
    path.write_text(text)
    return load_solution(path)


def key_for(problem: Problem, candidate: Solution, **changes: Any) -> CheckKey:
    key = CheckKey(
        problem=problem,
        solution=candidate,
        backend="cpu",
        device=CPU,
        policy="strict",
        precision="fp32",
        atol=None,
        rtol=None,
        tool="/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so",
    )
    return replace(key, **changes)


def test_a_kept_answer_is_read_back(cache: Path, tmp_path: Path) -> None:
    key = key_for(resolve_problem("relu", "small"), solution(tmp_path, "A = 1\n"))
    assert cached_answer(key) is None
    keep_answer(key, FOUND)
    assert cached_answer(key) == FOUND
    entries = list(memory_checks_dir().iterdir())
    assert [e.name for e in entries] == [f"{key.digest()}.json"]
    assert memory_checks_dir().parent == cache


def test_anything_the_answer_depends_on_gives_a_miss(cache: Path, tmp_path: Path) -> None:
    relu = resolve_problem("relu", "small")
    key = key_for(relu, solution(tmp_path / "a", "A = 1\n"))
    keep_answer(key, CLEAN)
    other_text = solution(tmp_path / "b", "A = 2\n")
    different = {
        "solution text": replace(key, solution=other_text),
        "problem": replace(key, problem=resolve_problem("gelu_tanh", "small")),
        "problem size": replace(key, problem=resolve_problem("relu", "standard")),
        "atol": replace(key, atol=1e-3),
        "rtol": replace(key, rtol=1e-3),
        "device": replace(key, device={**CPU, "device": "NVIDIA H200"}),
        "torch": replace(key, device={**CPU, "torch": "2.6.0"}),
        "cuda": replace(key, device={**CPU, "cuda": "12.8"}),
        "precision": replace(key, precision="bf16"),
        "policy": replace(key, policy="kernelbench"),
        "backend": replace(key, backend="cuda"),
        "checker": replace(key, tool="/usr/local/cuda/bin/compute-sanitizer"),
    }
    for what, changed in different.items():
        assert changed.digest() != key.digest(), what
        assert cached_answer(changed) is None, what
    assert cached_answer(key) == CLEAN
    # the same text, loaded again from another folder, is the same solution
    assert cached_answer(replace(key, solution=solution(tmp_path / "c", "A = 1\n"))) == CLEAN


def test_an_edited_entry_reads_as_none(cache: Path, tmp_path: Path) -> None:
    """A forged answer (the finding erased, the signature kept) is not used."""
    key = key_for(resolve_problem("relu", "small"), solution(tmp_path, "A = 1\n"))
    keep_answer(key, FOUND)
    path = memory_checks_dir() / f"{key.digest()}.json"
    entry = json.loads(path.read_text())
    entry.update(errors=0, findings=[], output_ok=True)
    path.write_text(json.dumps(entry))
    assert cached_answer(key) is None


def test_an_entry_replayed_under_another_key_reads_as_none(cache: Path, tmp_path: Path) -> None:
    """A clean answer signed for one solution, copied to where another's answer would lie."""
    relu = resolve_problem("relu", "small")
    honest = key_for(relu, solution(tmp_path / "a", "A = 1\n"))
    bad = key_for(relu, solution(tmp_path / "b", "A = 2\n"))
    keep_answer(honest, CLEAN)
    entries = memory_checks_dir()
    (entries / f"{bad.digest()}.json").write_bytes(
        (entries / f"{honest.digest()}.json").read_bytes()
    )
    assert cached_answer(bad) is None
    assert cached_answer(honest) == CLEAN


def test_unreadable_entries_read_as_none(cache: Path, tmp_path: Path) -> None:
    key = key_for(resolve_problem("relu", "small"), solution(tmp_path, "A = 1\n"))
    memory_checks_dir().mkdir(parents=True)
    path = memory_checks_dir() / f"{key.digest()}.json"
    for text in ("{not json", "[1, 2]", json.dumps({**CLEAN, "hmac": 7}), json.dumps(CLEAN)):
        path.write_text(text)
        assert cached_answer(key) is None, text


def test_an_entry_signed_with_another_key_reads_as_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another harness's cache (another signing key) copied in is checked again."""
    key = key_for(resolve_problem("relu", "small"), solution(tmp_path, "A = 1\n"))
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "theirs"))
    keep_answer(key, CLEAN)
    theirs = memory_checks_dir() / f"{key.digest()}.json"
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "ours"))
    memory_checks_dir().mkdir(parents=True)
    (memory_checks_dir() / theirs.name).write_bytes(theirs.read_bytes())
    assert cached_answer(key) is None


def answer(result: Any) -> dict[str, Any]:
    check = result.details.memory_check
    return {k: check[k] for k in ("tool", "scope", "errors", "findings", "output_ok")}


def verdict(result: Any) -> tuple[Any, ...]:
    stage = result.error.stage if result.error is not None else None
    return (result.correct, result.reward > 0, sorted(result.flags), stage)


@pytest.mark.slow  # the example's AddressSanitizer build (shared) and three evaluations
def test_a_repeated_solution_is_answered_from_the_cache(answers_only: Path) -> None:
    problem = resolve_problem("relu", "small")
    candidate = load_solution(EXAMPLE_CPU)
    first = evaluate(problem, candidate, fast_options(memory_check=True))
    assert first.correct, (first.error, first.flags)
    assert first.details.memory_check["ran"] and not first.details.memory_check["cached"]
    assert answer(first)["errors"] == 0 and answer(first)["output_ok"] is True

    second = evaluate(problem, candidate, fast_options(memory_check=True))
    assert second.details.memory_check["cached"] is True
    assert verdict(second) == verdict(first)
    assert answer(second) == answer(first)

    again = evaluate(
        problem, candidate, fast_options(memory_check=True, use_memory_check_cache=False)
    )
    assert again.details.memory_check["cached"] is False
    assert again.details.memory_check["ran"] is True
    assert verdict(again) == verdict(first)
    assert answer(again) == answer(first)
    assert len(list(memory_checks_dir().iterdir())) == 1


@pytest.mark.slow  # the fixture's AddressSanitizer build (shared) and two evaluations
def test_a_repeated_finding_rejects_again_from_the_cache(answers_only: Path) -> None:
    problem = resolve_problem("relu", "small")
    candidate = load_solution(FIXTURES / "m1_read_past_end.py")
    first = evaluate(problem, candidate, fast_options(memory_check=True))
    assert not first.details.memory_check["cached"]
    assert "memory_error:access" in first.flags and not first.correct
    second = evaluate(problem, candidate, fast_options(memory_check=True))
    assert second.details.memory_check["cached"] is True
    assert verdict(second) == verdict(first)
    assert answer(second) == answer(first)
    assert second.error is not None and first.error is not None
    assert second.error.message == first.error.message
