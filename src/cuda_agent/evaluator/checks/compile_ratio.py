"""The torch.compile baseline: measured in its own clean process, cached per problem and device.

The cached quantity is the ratio ``t_compile / t_eager`` measured interleaved in that process;
an evaluation's compile time is its own live eager time times the ratio. Chaining through eager
keeps speed-ups consistent even when the machine's state differs between the two processes.
The cache key covers the problem's content hash, the device, torch, the precision policy and
the CPU thread count, so a result is never reused where it would not hold.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import baselines_dir, ensure_dir
from cuda_agent.core.records import CompileBaselineRecord, StageError
from cuda_agent.core.signed_entries import read_entry, write_entry
from cuda_agent.core.types import Problem
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.launch.worker_process import run_worker
from cuda_agent.evaluator.launch.worker_spawn import worker_env
from cuda_agent.evaluator.options import EvalOptions

CACHE_VERSION = "2"  # 2: modules run in the mode their constructor left (training)


@dataclass
class CompileBaseline:
    """The baseline an evaluation uses: the worker's record (measured now, or the cache's
    entry of an earlier one), or why there is none (``error``, stage ``baseline``)."""

    record: CompileBaselineRecord | None = None
    error: StageError | None = None
    cached: bool = False
    rejected_entry: bool = False  # a cached entry failed its signature and was re-measured

    @property
    def ok(self) -> bool:
        return self.record is not None and self.error is None

    @property
    def ratio(self) -> float | None:
        return self.record.ratio if self.record is not None else None

    @property
    def message(self) -> str:
        """Why there is no baseline ("" with one)."""
        return self.error.message if self.error is not None else ""

    @classmethod
    def failed(cls, message: str) -> CompileBaseline:
        return cls(error=StageError("baseline", message))


def cache_key(problem: Problem, device: dict[str, Any], opts: EvalOptions) -> str:
    parts = [
        CACHE_VERSION,
        problem.content_hash,
        str(device.get("device")),
        str(device.get("torch")),
        str(device.get("cuda")),
        opts.backend,
        str(opts.cpu_threads),
        f"precision:{opts.precision}",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def compile_baseline(
    problem: Problem,
    device: dict[str, Any],
    opts: EvalOptions,
    scratch: Path,
    env_extra: dict[str, str] | None = None,
    device_lock: str = "",
) -> CompileBaseline:
    key = cache_key(problem, device, opts)
    path = baselines_dir() / f"{key}.json"
    cached = read_entry(path, key)
    rejected = cached is None and path.exists()
    if cached is not None and opts.profile and cached.get("profile") is None:
        cached = None  # the cached entry has no kernel table: measure again
    if opts.use_baseline_cache and cached is not None:
        return CompileBaseline(CompileBaselineRecord.from_dict({**cached, "ok": True}), cached=True)
    # the comparison of compiled and eager outputs uses the problem's own tolerance
    request = worker_request(
        "compile_baseline",
        replace(opts, atol=None, rtol=None),
        problem,
        opts.seed or 0,
        lock_path=device_lock,
    )
    env = worker_env(
        {
            "TORCHINDUCTOR_CACHE_DIR": str(ensure_dir(baselines_dir() / "inductor")),
            **(env_extra or {}),
        }
    )
    outcome = run_worker(request, timeout_s=opts.baseline_timeout_s, scratch=scratch, env=env)
    record = outcome.record_of(CompileBaselineRecord)
    if record is None:
        return CompileBaseline.failed(
            f"the torch.compile baseline process {outcome.death_reason()}"
        )
    if not record.ok:
        return CompileBaseline.failed(record.message)
    data = record.to_dict()
    for key_name in ("ok", "error", "traceback"):
        data.pop(key_name)
    write_entry(ensure_dir(baselines_dir()) / f"{key}.json", key, data)
    return CompileBaseline(record, rejected_entry=rejected)
