"""The pool shared by the commands that run many evaluations (bench, synth, problems lint)."""

from __future__ import annotations

from cuda_agent.cluster.local import LocalPool
from cuda_agent.cluster.pool import EvalPool
from cuda_agent.core.errors import ConfigError


def check_pool_choice(ray: str | None, jobs_per_device: int) -> None:
    """Refuse pool options that do not go together (before anything is written or started)."""
    if ray and jobs_per_device != 1:
        raise ConfigError("--jobs-per-gpu is a LocalPool option; not with --ray")


def make_pool(
    backend: str,
    workers: int | None,
    ray: str | None,
    worker_slots: int = 1,
    build_workers: int | None = None,
    jobs_per_device: int = 1,
) -> EvalPool:
    """A ``RayPool`` for ``--ray`` (``local`` or an address), else a ``LocalPool``.

    ``jobs_per_device`` (LocalPool only): evaluations sharing each device, taking turns.
    """
    check_pool_choice(ray, jobs_per_device)
    if ray:
        from cuda_agent.cluster.ray_pool import RayPool

        return RayPool(
            backend,
            address=None if ray == "local" else ray,
            workers=workers,
            worker_slots=worker_slots,
        )
    devices = (
        None
        if workers is None
        else (
            [str(i) for i in range(workers)]
            if backend == "cuda"
            else [f"cpu{i}" for i in range(workers)]
        )
    )
    return LocalPool(
        backend,
        devices=devices,
        worker_slots=worker_slots,
        build_workers=build_workers,
        jobs_per_device=jobs_per_device,
    )
