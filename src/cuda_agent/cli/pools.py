"""The pool shared by the commands that run many evaluations (bench, synth, problems lint)."""

from __future__ import annotations

from cuda_agent.cluster.local import LocalPool
from cuda_agent.cluster.pool import EvalPool


def make_pool(
    backend: str,
    workers: int | None,
    ray: str | None,
    worker_slots: int = 1,
    build_workers: int | None = None,
) -> EvalPool:
    """A ``RayPool`` for ``--ray`` (``local`` or an address), else a ``LocalPool``."""
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
        backend, devices=devices, worker_slots=worker_slots, build_workers=build_workers
    )
