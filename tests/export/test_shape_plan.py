"""The ``shape_plan`` worker mode, run in this process: problems described at several sizes."""

from __future__ import annotations

from cuda_agent.core.records import ShapePlanRecord
from cuda_agent.evaluator.launch.requests import worker_request
from cuda_agent.evaluator.worker.modes.shape_plan import run as run_shape_plan
from cuda_agent.evaluator.worker.protocol import EvalSettings, ResultChannel
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.problems.source import apply_size_overrides
from tests.helpers import source_problem

CPU = EvalSettings(backend="cpu")

DATA_DEPENDENT = """
import torch
import torch.nn as nn

n = 8


class Model(nn.Module):
    def forward(self, x, extra):
        k = int((x > 0).sum().item())  # no meta kernel can answer this
        return x[:k], x.sum(dim=0) + extra


def get_inputs():
    return [torch.randn(n, 4), 3]


def get_init_inputs():
    return []
"""


def plan(*sources: str) -> ShapePlanRecord:
    batch = [{"id": str(k), "source": s} for k, s in enumerate(sources)]
    request = worker_request("shape_plan", CPU, source_problem(sources[0]), seed=1, batch=batch)
    return run_shape_plan(request, ResultChannel(-1, ""))


def test_bundled_problem_is_described_on_the_meta_device() -> None:
    source = resolve_problem("bias_gelu_scale", "small").source
    wider = apply_size_overrides(source, {"dim": 2048}, "p.py")
    record = plan(source, wider)
    assert record.ok and record.memory_bytes
    base, other = record.plans
    assert base["ok"] and base["ran_on"] == "meta"
    assert base["init_args"] == [1024, 1.75]
    assert base["inputs"] == [{"shape": [16, 1024], "dtype": "float32"}]
    assert base["state"] == {"bias": {"shape": [1024], "dtype": "float32"}}
    assert base["output"] == {
        "kind": "tensor",
        "tensors": [{"shape": [16, 1024], "dtype": "float32"}],
    }
    assert base["bytes"] == {"inputs": 16 * 1024 * 4, "state": 1024 * 4, "outputs": 16 * 1024 * 4}
    assert other["inputs"] == [{"shape": [16, 2048], "dtype": "float32"}]


def test_a_size_the_reference_rejects_is_reported() -> None:
    source = resolve_problem("bias_gelu_scale", "small").source
    broken = source.replace("return [torch.randn(batch_size, dim)]", "return [torch.randn(3, 5)]")
    record = plan(broken)
    (only,) = record.plans
    assert only["ok"] is False
    assert "Model.forward failed" in only["error"]  # the meta run failed, then the real one


def test_data_dependent_reference_runs_for_real_with_numbers_and_tuples() -> None:
    (only,) = plan(DATA_DEPENDENT).plans
    assert only["ok"] and only["ran_on"] == "cpu"
    assert only["inputs"][1] == {"value": 3}
    assert only["output"]["kind"] == "tuple" and len(only["output"]["tensors"]) == 2
