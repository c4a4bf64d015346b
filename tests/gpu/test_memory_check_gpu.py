"""The memory check on the GPU (``pytest -m gpu``): compute-sanitizer memcheck on the
candidate's own kernels, the NaN fill, and the guarded trial (red zones).

Every CUDA fixture is a single-file solution of the bundled ``relu`` problem built from one CUDA
source (one extension, built once); each calls its own launcher. The verified run cannot tell
most of them from the honest one: their outputs are right. Only the memory check can, except
the read whose value reaches the output, which the guarded trial catches at full speed. The
Triton fixtures are the same cases written in Triton (their names come from the launch hook).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.checks.memory_safety import find_compute_sanitizer
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

// reads x[-1]: one element before the start of the input, for the first thread
__global__ void relu_before(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) { float prev = x[i - 1]; y[i] = prev == 123456.f ? 0.f : (x[i] > 0.f ? x[i] : 0.f); }
}

// loads x[i + 1] and throws it away: nothing of it reaches the output. A PTX volatile load,
// which neither nvcc nor ptxas may drop: on the H200 a plain load into an unused volatile
// local, and then an `asm volatile` plain ld.global, were both removed by the compiler (a
// load that never runs is no access: memcheck saw nothing)
__global__ void relu_discard(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) {
    float next;
    asm volatile("ld.volatile.global.f32 %0, [%1];" : "=f"(next) : "l"(x + i + 1));
    y[i] = x[i] > 0.f ? x[i] : 0.f;
  }
}

// reads x[i + 1] and lets it reach the output (times zero: NaN when the memory holds NaN)
__global__ void relu_reach(const float* x, float* y, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = (x[i] > 0.f ? x[i] : 0.f) + 0.f * x[i + 1];
}

// writes two elements past the end of its first buffer, into the second one it fills after
__global__ void relu_between(const float* x, float* y, float* z, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n + 2) y[i] = i < n ? (x[i] > 0.f ? x[i] : 0.f) : 0.f;
  if (i < n) z[i] = 1.f;
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
  if (which == 4) relu_before<<<grid(n), 256, 0, s>>>(a, o, n);
  if (which == 5) relu_discard<<<grid(n), 256, 0, s>>>(a, o, n);
  if (which == 6) relu_reach<<<grid(n), 256, 0, s>>>(a, o, n);
  if (which == 7) {
    auto z = torch::empty_like(x);
    relu_between<<<grid(n + 2), 256, 0, s>>>(a, o, z.data_ptr<float>(), n);
  }
  if (which == 8) {  // a small scratch: the caching allocator's recycled memory, not zeros
    auto scratch = torch::empty({n}, x.options());
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

KERNELS = {
    "exact": 0,
    "read_past_end": 1,
    "write_past_end": 2,
    "uninitialized_read": 3,
    "read_before_start": 4,
    "read_past_end_discarded": 5,
    "read_past_end_reaches_output": 6,
    "write_between_buffers": 7,
    "uninitialized_small_scratch": 8,
}
TRITON_SOLUTION = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    %s
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
"""
TRITON_KERNELS = {
    "exact": "x = x",
    # a load without a mask: the last lane reads one element past the end; its value decides
    # nothing (a compared value, so the compiler keeps the load)
    "unmasked_read_discarded": "x = tl.where(tl.load(x_ptr + offs + 1) == 123456.0, 0.0, x)",
    "unmasked_read_reaches_output": "x = x + 0.0 * tl.load(x_ptr + offs + 1)",
}


def evaluate_kernel(tmp_path: Path, kernel: str, **options: object):
    path = tmp_path / f"{kernel}.py"
    path.write_text(SOLUTION % (CUDA_SOURCE, KERNELS[kernel]))
    opts = fast_options(**{"backend": "cuda", "memory_check": True, **options})
    return evaluate(resolve_problem("relu", "small"), load_solution(path), opts)


def evaluate_triton(tmp_path: Path, kernel: str, **options: object):
    path = tmp_path / f"triton_{kernel}.py"
    path.write_text(TRITON_SOLUTION % TRITON_KERNELS[kernel])
    opts = fast_options(**{"backend": "cuda", "memory_check": True, **options})
    return evaluate(resolve_problem("relu", "small"), load_solution(path), opts)


@pytest.fixture(autouse=True)
def _sanitizer_here() -> None:
    if find_compute_sanitizer() is None:
        pytest.fail("compute-sanitizer is not installed on this GPU host")


def test_an_honest_kernel_passes_the_memory_check(tmp_path: Path) -> None:
    result = evaluate_kernel(tmp_path, "exact", use_memory_check_cache=False)
    assert result.correct, result.error
    check = result.details.memory_check
    assert check["ran"] and check["errors"] == 0 and check["output_ok"] is True
    assert check["incomplete"] is None and not check["cached"]
    # only the candidate's own kernels were instrumented: the extension's names were read
    assert check["scope"].startswith("own kernels"), check["scope"]
    assert any("relu_exact" in name for name in result.record.kernel_symbols), result.record


def test_a_repeated_check_is_answered_from_the_cache(tmp_path: Path) -> None:
    first = evaluate_kernel(tmp_path, "read_past_end")
    again = evaluate_kernel(tmp_path, "read_past_end")
    assert again.details.memory_check["cached"], again.details.memory_check
    assert again.flags == first.flags and "memory_error:access" in again.flags


@pytest.mark.parametrize("policy", ["strict", "kernelbench"])
@pytest.mark.parametrize(
    "kernel",
    [
        "read_past_end",
        "write_past_end",
        "read_before_start",
        "read_past_end_discarded",
        "write_between_buffers",
    ],
)
def test_an_access_past_the_end_is_a_memory_error(tmp_path: Path, kernel: str, policy: str) -> None:
    result = evaluate_kernel(tmp_path, kernel, policy=policy, use_memory_check_cache=False)
    assert not result.correct and result.reward == -1
    assert "memory_error:access" in result.flags, (result.flags, result.error)
    assert result.error is not None and result.error.stage == "memory"
    assert result.details.memory_check["errors"] > 0


def test_a_read_of_memory_never_written_is_a_memory_error(tmp_path: Path) -> None:
    result = evaluate_kernel(tmp_path, "uninitialized_read")
    assert not result.correct
    assert "memory_error:uninitialized" in result.flags, (result.flags, result.error)


def test_a_small_scratch_never_written_is_rejected(tmp_path: Path) -> None:
    """A small scratch comes from the caching allocator's recycled blocks: in verification
    they may already hold NaN (the guarded trial's guard bytes, freed), else the checked run's
    fill gives NaN. Rejected either way (on the H200 the first: output_mismatch:nan)."""
    result = evaluate_kernel(tmp_path, "uninitialized_small_scratch")
    assert not result.correct
    found = {"memory_error:uninitialized", "output_mismatch:nan"} & set(result.flags)
    assert found, (result.flags, result.error)


@pytest.mark.parametrize("policy", ["strict", "kernelbench"])
def test_a_read_that_reaches_the_output_is_caught_by_the_guarded_trial(
    tmp_path: Path, policy: str
) -> None:
    """The red zones need no checker: with the memory check off the verdict is the same,
    at stage verify."""
    for check in (True, False):
        result = evaluate_kernel(
            tmp_path, "read_past_end_reaches_output", policy=policy, memory_check=check
        )
        assert "memory_error:access" in result.flags, (result.flags, result.error)
        assert result.error is not None and result.error.stage == "verify", result.error


def test_an_honest_triton_kernel_passes_the_memory_check(tmp_path: Path) -> None:
    result = evaluate_triton(tmp_path, "exact", use_memory_check_cache=False)
    assert result.correct, (result.flags, result.error)
    check = result.details.memory_check
    assert check["errors"] == 0 and check["output_ok"] is True and check["incomplete"] is None
    assert check["scope"].startswith("own kernels"), check["scope"]
    assert any("relu_kernel" in name for name in result.record.kernel_symbols)


@pytest.mark.parametrize("policy", ["strict", "kernelbench"])
@pytest.mark.parametrize("kernel", ["unmasked_read_discarded", "unmasked_read_reaches_output"])
def test_a_triton_load_without_a_mask_is_a_memory_error(
    tmp_path: Path, kernel: str, policy: str
) -> None:
    result = evaluate_triton(tmp_path, kernel, policy=policy, use_memory_check_cache=False)
    assert not result.correct and "memory_error:access" in result.flags, (
        result.flags,
        result.error,
    )


def test_without_the_check_the_faulty_kernels_are_credited(tmp_path: Path) -> None:
    """The control: verification alone cannot see them (why the check exists). Not the
    write past the end: where it lands depends on the caching allocator's blocks."""
    for kernel in ("read_past_end", "uninitialized_read", "read_past_end_discarded"):
        result = evaluate_kernel(tmp_path, kernel, memory_check=False)
        assert result.correct, (kernel, result.flags, result.error)
