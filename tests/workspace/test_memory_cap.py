"""The worker's memory cap (``workspace/memory_cap.py``): its default, its override, and the
words a verdict uses when a worker runs into it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cuda_agent.core.errors import ConfigError
from cuda_agent.evaluator.builder.compile_sandbox import confine_compiler
from cuda_agent.evaluator.launch.worker_spawn import worker_sandbox
from cuda_agent.workspace import memory_cap
from cuda_agent.workspace.memory_cap import (
    MEMORY_CAP_ENV,
    cap_exceeded,
    cap_message,
    worker_memory_cap_bytes,
)

GIB = 1 << 30


def test_default_is_half_the_host_split_among_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MEMORY_CAP_ENV, raising=False)
    monkeypatch.setattr(memory_cap, "host_memory_bytes", lambda: 64 * GIB)
    memory_cap.set_concurrent_workers(1)
    assert worker_memory_cap_bytes("cpu") == 32 * GIB
    memory_cap.set_concurrent_workers(4)
    assert worker_memory_cap_bytes("cpu") == 8 * GIB
    memory_cap.set_concurrent_workers(1000)
    assert worker_memory_cap_bytes("cpu") == memory_cap.MIN_CAP_BYTES
    memory_cap.set_concurrent_workers(1)


def test_no_address_space_cap_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, "3")
    assert worker_memory_cap_bytes("cuda") is None


@pytest.mark.parametrize(("value", "cap"), [("3", 3 * GIB), ("1.5", 3 * GIB // 2), ("off", None)])
def test_the_variable_sets_the_cap(
    monkeypatch: pytest.MonkeyPatch, value: str, cap: int | None
) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, value)
    assert worker_memory_cap_bytes("cpu") == cap


@pytest.mark.parametrize("value", ["-1", "lots", "inf"])
def test_an_unusable_variable_is_one_line(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, value)
    with pytest.raises(ConfigError, match=MEMORY_CAP_ENV):
        worker_memory_cap_bytes("cpu")


def test_a_refused_allocation_is_recognised_and_named() -> None:
    torch_error = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824"
    assert cap_exceeded(torch_error)
    assert cap_exceeded("Traceback ...\nMemoryError")
    assert not cap_exceeded("AssertionError: outputs differ")
    assert cap_message(3 * GIB).startswith("worker exceeded its memory cap of 3 GiB")


def test_a_compiler_process_runs_under_the_cap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, "3")
    argv, env = confine_compiler(["sh", "-c", "ulimit -v"], tmp_path)
    out = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == str(3 * GIB // 1024), out.stderr


def test_the_worker_sandbox_carries_the_cap_on_cpu_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MEMORY_CAP_ENV, "3")
    cpu = worker_sandbox("cpu", {}, tmp_path / "cpu", allow_unsandboxed=True)
    assert cpu.policy.address_space_bytes == 3 * GIB
    asan = worker_sandbox("cpu", {}, tmp_path / "asan", True, address_space_limit=False)
    assert asan.policy.address_space_bytes is None


def test_cuda_workers_get_a_watched_cap_of_at_least_8_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_CAP_ENV, raising=False)
    monkeypatch.setattr(memory_cap, "host_memory_bytes", lambda: 128 * GIB)
    memory_cap.set_concurrent_workers(3)
    assert memory_cap.host_cap_bytes("cuda") == 64 * GIB // 3
    assert memory_cap.host_cap_bytes("cpu") is None  # RLIMIT_AS caps cpu workers
    memory_cap.set_concurrent_workers(100)
    assert memory_cap.host_cap_bytes("cuda") == memory_cap.MIN_WATCHED_CAP_BYTES
    memory_cap.set_concurrent_workers(1)
    monkeypatch.setenv(MEMORY_CAP_ENV, "3")  # the variable sets it as it is, below the floor
    assert memory_cap.host_cap_bytes("cuda") == 3 * GIB
