"""The cuda backend end to end (run on a GPU host: ``pytest -m gpu``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.evaluator.pipeline import evaluate
from cuda_agent.examples import example_solutions
from cuda_agent.problems.sets import resolve_problem
from cuda_agent.solutions.loader import load_solution
from tests.helpers import fast_options

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def run(solution: Path, problem: str = "relu", size: str = "small", **options: object):
    opts = fast_options(backend="cuda", **options)
    return evaluate(resolve_problem(problem, size), load_solution(solution), opts)


def cuda_solution(
    tmp_path: Path,
    cuda_body: str,
    forward: str = "return ext.run(x)",
    extra: str = "",
    name: str = "solution.py",
) -> Path:
    """A KernelBench-style single file whose CUDA source defines ``torch::Tensor run(x)``."""
    text = (
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
        f"{extra}\n"
        f"CUDA = r'''\n#include <c10/cuda/CUDAStream.h>\n{cuda_body}\n'''\n"
        "ext = load_inline(name='ca_gpu_" + name.replace(".py", "") + "', "
        "cpp_sources='torch::Tensor run(torch::Tensor x);', cuda_sources=CUDA, "
        "functions=['run'])\n\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n"
        f"        {forward}\n"
    )
    path = tmp_path / name
    path.write_text(text)
    return path


RELU_KERNEL = r"""
__global__ void relu_k(const float* x, float* y, long n) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""


@pytest.mark.parametrize(("problem_id", "path"), example_solutions("cuda"))
def test_examples_are_correct_and_run_their_own_kernels(problem_id: str, path: Path) -> None:
    result = run(path, problem_id, size="standard")
    assert result.correct, result.error
    assert result.flags == []
    kernels = result.details["kernels"]
    assert kernels["custom_kernels"] >= 1 and kernels["coverage"] > 0.5
    assert result.details["device"]["capability"] == "9.0"
    assert result.details["timing"]["profiler_busy_us"] <= result.runtime_us * 1.15 + 20


def test_work_on_another_stream_is_rejected(tmp_path: Path) -> None:
    body = (
        RELU_KERNEL
        + r"""
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  cudaStream_t side;
  cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);  // never joined: escapes the timer
  for (int r = 0; r < 20; ++r)
    relu_k<<<1024, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}
"""
    )
    result = run(cuda_solution(tmp_path, body), size="standard")
    assert result.reward == -1.0
    assert "work_outside_timed_stream" in result.flags, (result.flags, result.error)


def test_joined_side_stream_is_timed_honestly(tmp_path: Path) -> None:
    body = (
        RELU_KERNEL
        + r"""
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  cudaStream_t main = c10::cuda::getCurrentCUDAStream().stream();
  static cudaStream_t side = nullptr;
  static cudaEvent_t ready, done;
  if (!side) {
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  }
  cudaEventRecord(ready, main);
  cudaStreamWaitEvent(side, ready, 0);
  relu_k<<<1024, 256, 0, side>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  cudaEventRecord(done, side);
  cudaStreamWaitEvent(main, done, 0);
  return y;
}
"""
    )
    result = run(cuda_solution(tmp_path, body), size="standard")
    assert result.correct, result.error
    assert result.flags == []


def test_illegal_memory_access_costs_one_evaluation(tmp_path: Path) -> None:
    body = r"""
__global__ void bad(float* y) { y[threadIdx.x + (1L << 40)] = 1.f; }
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  bad<<<1, 32, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(y.data_ptr<float>());
  return y;
}
"""
    result = run(cuda_solution(tmp_path, body))
    assert result.reward == -1.0 and result.error is not None
    assert "illegal memory access" in result.error.message or "crashed" in result.flags
    (relu_example,) = [p for pid, p in example_solutions("cuda") if pid == "relu"]
    assert run(relu_example).correct


def test_gpu_out_of_memory_is_a_verdict(tmp_path: Path) -> None:
    path = cuda_solution(
        tmp_path,
        RELU_KERNEL + "torch::Tensor run(torch::Tensor x) { return x; }",
        forward="return torch.empty(1 << 46, device=x.device)",
        name="oom.py",
    )
    result = run(path, policy="off")
    assert result.reward == -1.0 and result.error is not None
    assert "out of memory" in result.error.message.lower()


def test_enabling_tf32_is_a_violation(tmp_path: Path) -> None:
    path = cuda_solution(
        tmp_path,
        RELU_KERNEL
        + r"""
torch::Tensor run(torch::Tensor x) {
  auto y = torch::empty_like(x);
  auto stream = c10::cuda::getCurrentCUDAStream().stream();
  relu_k<<<256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
  return y;
}""",
        forward="torch.backends.cuda.matmul.allow_tf32 = True\n        return ext.run(x)",
        name="tf32.py",
    )
    result = run(path)
    assert "global_state_changed:cuda_matmul_tf32" in result.flags
    assert result.reward == -1.0


def test_torch_op_called_from_cpp_is_seen_by_the_dispatcher(tmp_path: Path) -> None:
    path = cuda_solution(
        tmp_path, "torch::Tensor run(torch::Tensor x) { return at::relu(x); }", name="cpp_torch.py"
    )
    result = run(path)
    assert "forbidden_op:relu" in result.flags


def test_profile_stage_tables(tmp_path: Path) -> None:
    (relu_example,) = [p for pid, p in example_solutions("cuda") if pid == "relu"]
    result = run(relu_example, size="standard", baselines=("eager", "compile"), profile=True)
    assert result.correct, result.error
    profile = result.details["profile"]
    assert any(row["custom"] for row in profile["candidate"]["table"])
    assert profile["eager"]["table"] and not any(r["custom"] for r in profile["eager"]["table"])
    assert profile["compile"]["table"]
    assert "kernels" in profile["ncu"] or "error" in profile["ncu"]
    assert result.compile_us is not None and result.speedup_compile is not None
