"""The ``evaluation`` section of a stage configuration, turned into options and an evaluator.

Both verl adapters (the agent loop and the single-turn reward function) evaluate candidates
on GPUs that are not the training GPUs. The section (``common.yaml``) says how:

* ``backend``, ``policy``, ``baselines``: the ``EvalOptions`` of every evaluation;
* ``pool``: where evaluations run.
  - ``local``: in the process that asks (``evaluator.pipeline.evaluate``), on the devices it
    sees: right for the cpu backend and for a single machine, not inside verl's GPU-less
    agent-loop and reward workers with the cuda backend;
  - ``ray``: a ``RayPool`` on the Ray cluster this process belongs to (inside verl, verl's
    own cluster: join the evaluation nodes to it with ``ray start --address HEAD:6379``; their
    GPUs lie outside verl's placement groups, so evaluation and training GPUs stay apart);
  - a Ray address (``ray://HOST:10001``): a ``RayPool`` connected to that cluster, when this
    process has not started Ray yet. Inside a verl worker Ray is already up and one process
    cannot join a second cluster, so there the pool uses verl's cluster, as with ``ray``;
  - a reward service's URL (``http://HOST:8000``, ``cuda-agent serve --http``): every
    evaluation is a job of that service (token from ``CUDA_AGENT_TOKEN``; docs/service.md).

Pools are made once per process and per (backend, pool) and shared by every episode of it.

Not here: retries and device pinning (the pools do that), timing options (the defaults of
``EvalOptions``; callers may pass their own options instead).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cuda_agent.cluster.pool import EvalPool
from cuda_agent.core.policy import DEFAULT_POLICY, Policy, parse_policy
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.evaluator.workspace_commands import Evaluator

_POOLS: dict[tuple[str, str], EvalPool] = {}
_POOLS_LOCK = threading.Lock()


@dataclass(frozen=True)
class EvaluationSettings:
    backend: str = "cuda"
    policy: Policy = DEFAULT_POLICY
    baselines: tuple[str, ...] = ("eager", "compile")
    pool: str = "local"

    @classmethod
    def from_mapping(cls, section: Mapping[str, Any] | None) -> EvaluationSettings:
        """From a plain mapping or an OmegaConf node (missing keys keep the defaults)."""
        if not section:
            return cls()
        values: dict[str, Any] = {}
        for key in ("backend", "pool"):
            if section.get(key) is not None:
                values[key] = str(section.get(key))
        if section.get("policy") is not None:
            values["policy"] = parse_policy(str(section.get("policy")))
        baselines = section.get("baselines")
        if baselines is not None:
            if isinstance(baselines, str):
                values["baselines"] = tuple(b for b in baselines.split(",") if b)
            elif isinstance(baselines, Sequence):
                values["baselines"] = tuple(str(b) for b in baselines)
            else:
                raise ValueError(f"evaluation.baselines: expected a list, got {baselines!r}")
        return cls(**values)

    def options(self) -> EvalOptions:
        return EvalOptions(
            backend=self.backend, policy=self.policy, baselines=self.baselines
        ).validate()

    def evaluator(self) -> Evaluator:
        """In-process evaluation for ``local``, else the process's shared Ray pool."""
        if self.pool == "local":
            return evaluate
        if self.pool.startswith(("http://", "https://")):
            from cuda_agent.service.remote_pool import service_evaluator

            return service_evaluator(self.pool)
        return _shared_pool(self.backend, self.pool).evaluate


def _shared_pool(backend: str, where: str) -> EvalPool:
    with _POOLS_LOCK:
        pool = _POOLS.get((backend, where))
        if pool is None:
            from cuda_agent.cluster.ray_pool import RayPool

            pool = RayPool(backend, address=None if where == "ray" else where)
            _POOLS[(backend, where)] = pool
        return pool
