"""Workers forked from a template: the same verdicts and confinement, a start paid once.

These run under the ``confine`` isolation mode (where workers confine themselves and are forked
from the template) whatever this machine's default is; ``CUDA_AGENT_WORKER_TEMPLATE=0`` starts
them the ordinary way, for comparison.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

import pytest

from cuda_agent.evaluator.checks.memory_safety import find_asan_runtime
from cuda_agent.evaluator.launch.asan import AsanRun
from cuda_agent.evaluator.launch.worker_spawn import spawn_worker, worker_env
from cuda_agent.evaluator.launch.worker_template import (
    ForkedWorker,
    Templates,
    TemplateUnavailable,
)
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.worker.template import cuda_driver_loaded, cuda_forks_work
from cuda_agent.examples import examples_root
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options, wait_for

pytestmark = pytest.mark.slow  # workers and a template


def _relu() -> tuple[object, object]:
    problem = resolve_problem("relu", "small")
    return problem, load_solution(examples_root() / "relu" / "cpu.py")


def test_a_forked_worker_gives_the_verdict_under_the_same_isolation(confine: str) -> None:
    problem, solution = _relu()
    forked = evaluate(problem, solution, fast_options())  # type: ignore[arg-type]
    assert forked.correct and forked.flags == [], forked.error
    assert forked.details.isolation == confine
    assert forked.details.worker_start["ready_after_s"] is not None


def test_the_template_forks_confined_workers_in_their_own_groups(
    confine: str, tmp_path: Path
) -> None:
    env = worker_env()
    handles = [spawn_worker("cpu", env, tmp_path / f"w{k}", sandboxed=True) for k in range(2)]
    try:
        for handle in handles:
            assert isinstance(handle.proc, ForkedWorker)
            assert os.getpgid(handle.proc.pid) == handle.proc.pid  # a session of its own
        assert handles[0].proc.pid != handles[1].proc.pid
        victim = handles[0].proc
        os.killpg(victim.pid, signal.SIGKILL)
        assert victim.wait(timeout=120) == -signal.SIGKILL  # reported by the template
    finally:
        for handle in handles:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(handle.proc.pid, signal.SIGKILL)
            handle.proc.wait(timeout=120)


def test_closing_the_template_kills_the_workers_it_forked(confine: str, tmp_path: Path) -> None:
    templates = Templates(tmp_path / "templates")
    template = templates.get("cpu", worker_env(), "k")
    out = tmp_path / "out"
    out.mkdir()
    worker, read_fd = template.fork(worker_env(), out, None, out / "o", out / "e")
    os.close(read_fd)
    assert worker.poll() is None
    templates.close()
    assert wait_for(lambda: worker.poll() is not None, deadline_s=120)


def test_without_a_template_the_worker_is_its_own_process(
    confine: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CUDA_AGENT_WORKER_TEMPLATE", "0")
    handle = spawn_worker("cpu", worker_env(), tmp_path / "w", sandboxed=True)
    try:
        assert not isinstance(handle.proc, ForkedWorker)
    finally:
        os.killpg(handle.proc.pid, signal.SIGKILL)
        handle.proc.wait(timeout=120)


def test_workers_that_differ_only_in_our_settings_share_a_template(
    confine: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A worker whose environment names another cache or isolation mode is forked from the
    same template (our settings are read at run time, from the worker's own environment); one
    whose environment changes what a library reads when it loads gets a template of its own."""
    base = worker_env()
    ours = {**base, "CUDA_AGENT_CACHE": str(tmp_path / "other-cache"), "CUDA_AGENT_DEBUG": "1"}
    loads = {**base, "OMP_NUM_THREADS": "3"}
    handles = [
        spawn_worker("cpu", env, tmp_path / name, sandboxed=True)
        for name, env in (("base", base), ("ours", ours), ("loads", loads))
    ]
    try:
        assert all(isinstance(handle.proc, ForkedWorker) for handle in handles)
        parents = [_parent(handle.proc.pid) for handle in handles]
        assert parents[0] == parents[1] != parents[2]
    finally:
        for handle in handles:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(handle.proc.pid, signal.SIGKILL)
            handle.proc.wait(timeout=120)


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def _maps_asan(pid: int) -> bool:
    return "libasan" in Path(f"/proc/{pid}/maps").read_text()


def test_an_asan_worker_is_forked_from_a_template_under_asan(confine: str, tmp_path: Path) -> None:
    """The memory check's worker: forked from a template that runs under AddressSanitizer
    (not from the ordinary one), confined, its address space not limited."""
    runtime = find_asan_runtime()
    if runtime is None:
        pytest.skip("no AddressSanitizer runtime here")
    folder = tmp_path / "w"
    asan = AsanRun(runtime, "detect_leaks=0:halt_on_error=1", folder / "asan")
    handle = spawn_worker(
        "cpu", worker_env(), folder, sandboxed=True, address_space_limit=False, asan=asan
    )
    try:
        assert isinstance(handle.proc, ForkedWorker)
        assert handle.isolation == confine
        template = _parent(handle.proc.pid)
        assert "cuda_agent.evaluator.worker.template" in Path(
            f"/proc/{template}/cmdline"
        ).read_text(errors="replace")
        assert _maps_asan(template) and _maps_asan(handle.proc.pid)
        limits = Path(f"/proc/{handle.proc.pid}/limits").read_text()
        assert any(
            line.startswith("Max address space") and "unlimited" in line
            for line in limits.splitlines()
        )
    finally:
        os.killpg(handle.proc.pid, signal.SIGKILL)
        handle.proc.wait(timeout=120)


def test_a_template_without_asan_refuses_a_report_path(tmp_path: Path) -> None:
    templates = Templates(tmp_path / "templates")
    try:
        template = templates.get("cpu", worker_env(), "k")
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(TemplateUnavailable, match="AddressSanitizer"):
            template.fork(worker_env(), out, None, out / "o", out / "e", str(out / "asan"))
    finally:
        templates.close()


def test_no_cuda_driver_in_a_process_that_never_used_cuda() -> None:
    assert cuda_driver_loaded() is False
    assert cuda_forks_work() is True  # nothing mapped: no probe needed
