"""The memory check on the GPU (``pytest -m gpu``): compute-sanitizer memcheck and the NaN fill.

Every fixture is a single-file solution of the bundled ``relu`` problem built from one CUDA
source (one extension, built once); each calls its own launcher. The verified run cannot tell
them from the honest one: their outputs are right. Only the memory check can.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.memory_check import find_compute_sanitizer
from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

CUDA_SOURCE = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_exact(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

// reads x[i + 3]: past the end of the input for the last three threads
__global__ void relu_peek(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { float next = x[i + 3]; y[i] = next == 123456.f ? 0.f : (x[i] > 0.f ? x[i] : 0.f); }
}

// writes two elements past the end of the output
__global__ void relu_spill(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n + 2) y[i] = i < n ? (x[i] > 0.f ? x[i] : 0.f) : 0.f;
}

// reads a scratch buffer it never wrote (times zero: right unless the memory holds NaN/Inf;
// the buffer is large, so the caching allocator gives it memory fresh from the driver, zeros)
__global__ void relu_scratch(const float* x, const float* scratch, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = (x[i] > 0.f ? x[i] : 0.f) + 0.f * scratch[i];
}

static dim3 grid(long n) { return dim3((unsigned)((n + 255) / 256)); }

torch::Tensor run(torch::Tensor x, int64_t which) {
  auto y = torch::empty_like(x);
  auto s = c10::cuda::getCurrentCUDAStream().stream();
  const long n = x.numel();
  const float* a = x.data_ptr<float>();
  float* o = y.data_ptr<float>();
  if (which == 0) relu_exact<<<grid(n), 256, 0, s>>>(a, o, n);
  if (which == 1) relu_peek<<<grid(n), 256, 0, s>>>(a, o, n);
  if (which == 2) relu_spill<<<grid(n + 2), 256, 0, s>>>(a, o, n);
  if (which == 3) {
    auto scratch = torch::empty({1L << 26}, x.options());
    relu_scratch<<<grid(n), 256, 0, s>>>(a, scratch.data_ptr<float>(), o, n);
  }
  return y;
}
"""

SOLUTION = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""%s"""
ops = load_inline("mem_check_ops", "torch::Tensor run(torch::Tensor x, int64_t which);",
                  cuda_sources=CUDA_SOURCE, functions=["run"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ops.run(x, %d)
'''

KERNELS = {"exact": 0, "read_past_end": 1, "write_past_end": 2, "uninitialized_read": 3}


def evaluate_kernel(tmp_path: Path, kernel: str, **options: object):
    path = tmp_path / f"{kernel}.py"
    path.write_text(SOLUTION % (CUDA_SOURCE, KERNELS[kernel]))
    opts = fast_options(**{"backend": "cuda", "memory_check": True, **options})
    return evaluate(resolve_problem("relu", "small"), load_solution(path), opts)


@pytest.fixture(autouse=True)
def _sanitizer_here() -> None:
    if find_compute_sanitizer() is None:
        pytest.fail("compute-sanitizer is not installed on this GPU host")


def test_an_honest_kernel_passes_the_memory_check(tmp_path: Path) -> None:
    result = evaluate_kernel(tmp_path, "exact")
    assert result.correct, result.error
    check = result.details["memory_check"]
    assert check["ran"] and check["errors"] == 0 and check["output_ok"] is True
    assert check["incomplete"] is None


@pytest.mark.parametrize("policy", ["strict", "kernelbench"])
@pytest.mark.parametrize("kernel", ["read_past_end", "write_past_end"])
def test_an_access_past_the_end_is_a_memory_error(tmp_path: Path, kernel: str, policy: str) -> None:
    result = evaluate_kernel(tmp_path, kernel, policy=policy)
    assert not result.correct and result.reward == -1
    assert "memory_error:access" in result.flags, (result.flags, result.error)
    assert result.error is not None and result.error.stage == "memory"
    assert result.details["memory_check"]["errors"] > 0


def test_a_read_of_memory_never_written_is_a_memory_error(tmp_path: Path) -> None:
    result = evaluate_kernel(tmp_path, "uninitialized_read")
    assert not result.correct
    assert "memory_error:uninitialized" in result.flags, (result.flags, result.error)


def test_without_the_check_the_faulty_kernels_are_credited(tmp_path: Path) -> None:
    """The control: verification alone cannot see them (why the check exists). Not the
    write past the end: where it lands depends on the caching allocator's blocks."""
    for kernel in ("read_past_end", "uninitialized_read"):
        result = evaluate_kernel(tmp_path, kernel, memory_check=False)
        assert result.correct, (kernel, result.flags, result.error)
