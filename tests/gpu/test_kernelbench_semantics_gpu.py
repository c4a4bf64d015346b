"""KernelBench's semantics on the GPU (``pytest -m gpu``): seeded construction on the host and
modules in the mode their constructor left them (training).

* A candidate whose parameters are made on the host with the legacy ``torch.Tensor(shape)``
  constructor and initialised exactly as ``nn.ConvTranspose2d`` does is correct under
  KernelBench (both models built on the host from one seed). Under ``kernelbench`` its
  weights are not transferred (other names), so the seeded construction is what is compared:
  built under the device's factory context, the reference drew its weights from the CUDA
  generator and the candidate from the CPU one (``output_mismatch:value`` before the fix).
* BatchNorm folded with its running statistics is rejected, BatchNorm with batch statistics
  credited, as KernelBench does on the same GPU.
* A CUDA solution that subclasses the problem's ``Model`` without importing it is correct under
  ``kernelbench`` (the problem's namespace, as KernelBench's one dict) and a named load failure
  under ``strict``; rebinding ``Model.forward`` changes only the solution's copy
  (tests/evaluator/test_problem_namespace.py has the same on the cpu backend).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.bench.agreement import our_reason
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.adversarial.catalogue import BATCH_NORM
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

CONV_TRANSPOSE_PROBLEM = """import torch
import torch.nn as nn

batch_size = 4
in_channels = 8
out_channels = 16
size = 12


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv_transpose(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, 3]
"""

LEGACY_CANDIDATE = '''import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
__global__ void add_bias(float* y, const float* b, long plane, long channels, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += b[(i / plane) % channels];
}
torch::Tensor bias_(torch::Tensor y, torch::Tensor b) {
  const long n = y.numel(), plane = y.size(2) * y.size(3);
  add_bias<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), plane, y.size(1), n);
  return y;
}
"""
ops = load_inline("legacy_bias", "torch::Tensor bias_(torch::Tensor y, torch::Tensor b);",
                  cuda_sources=CUDA, functions=["bias_"])


class ModelNew(nn.Module):
    """Own parameter names (no transfer under kernelbench), made on the host and initialised
    as nn.ConvTranspose2d.reset_parameters does."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        k = kernel_size
        self.weight = nn.Parameter(torch.Tensor(in_channels, out_channels, k, k))
        self.bias = nn.Parameter(torch.Tensor(out_channels))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        bound = 1 / math.sqrt(fan_in)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return ops.bias_(F.conv_transpose2d(x, self.weight), self.bias)
'''


def test_parameters_made_on_the_host_get_the_references_weights(tmp_path: Path) -> None:
    problem_path = tmp_path / "conv_transpose.py"
    problem_path.write_text(CONV_TRANSPOSE_PROBLEM)
    solution_path = tmp_path / "legacy.py"
    solution_path.write_text(LEGACY_CANDIDATE)
    opts = fast_options(backend="cuda", policy="kernelbench")
    result = evaluate(
        resolve_problem(str(problem_path), "standard"), load_solution(solution_path), opts
    )
    assert result.correct, (result.flags, result.error)
    assert "weights_not_transferred" in result.record.notes


@pytest.mark.parametrize("policy", ["strict", "kernelbench"])
@pytest.mark.parametrize(
    ("fixture", "correct"),
    [("k1_batchnorm_running_stats", False), ("k1_batchnorm_batch_stats", True)],
)
def test_batch_norm_runs_in_training_mode_on_the_gpu(
    fixture: str, correct: bool, policy: str
) -> None:
    """The cpu fixtures (tests/adversarial/fixtures/k1_*) as CUDA kernels."""
    cuda_fixture = Path(__file__).parent / "kernelbench_fixtures" / f"{fixture}.py"
    opts = fast_options(backend="cuda", policy=policy)
    result = evaluate(resolve_problem(BATCH_NORM, "standard"), load_solution(cuda_fixture), opts)
    assert result.correct is correct, (result.flags, result.error)
    assert result.record.module_mode == "train"
    if not correct:
        assert "output_mismatch:value" in result.flags


RELU_EXTENSION = '''from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
__global__ void relu_k(const float* x, float* y, long n, int wrong) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = wrong ? x[i] : (x[i] > 0.f ? x[i] : 0.f);
}
torch::Tensor relu_(torch::Tensor x, int64_t wrong) {
  auto y = torch::empty_like(x);
  const long n = x.numel();
  relu_k<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n, (int)wrong);
  return y;
}
"""
ops = load_inline("namespace_relu", "torch::Tensor relu_(torch::Tensor x, int64_t wrong);",
                  cuda_sources=CUDA, functions=["relu_"])
'''

# `Model` (and through it torch and nn) taken from the problem's file, never imported here
SUBCLASS_CUDA = (
    RELU_EXTENSION
    + """

class ModelNew(Model):
    def forward(self, x):
        return ops.relu_(x.contiguous(), 0)
"""
)

# in KernelBench's one dict this makes the reference as wrong as the solution
TAMPERS_CUDA = (
    RELU_EXTENSION
    + """
import torch.nn as nn

Model.forward = lambda self, x: ops.relu_(x.contiguous(), 1)


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.relu_(x.contiguous(), 1)
"""
)


def _judge_relu(tmp_path: Path, source: str, policy: str):
    path = tmp_path / f"{policy}.py"
    path.write_text(source)
    opts = fast_options(backend="cuda", policy=policy)
    return evaluate(resolve_problem("relu", "standard"), load_solution(path), opts)


@pytest.mark.parametrize("policy", ["kernelbench", "strict"])
def test_a_subclass_of_the_problems_model_on_the_gpu(tmp_path: Path, policy: str) -> None:
    result = _judge_relu(tmp_path, SUBCLASS_CUDA, policy)
    if policy == "kernelbench":
        assert result.correct, (result.flags, result.error)
        return
    assert result.error is not None and result.error.stage == "load", result.error
    assert "`Model` is defined by the problem's file" in result.error.message
    assert our_reason(result).startswith("a name taken from the problem's file")


def test_rebinding_the_problems_model_on_the_gpu_fools_nothing(tmp_path: Path) -> None:
    result = _judge_relu(tmp_path, TAMPERS_CUDA, "kernelbench")
    assert not result.correct and result.flags == ["output_mismatch:value"], (
        result.flags,
        result.error,
    )
