"""Example solution (cpu backend, KernelBench single file): ReLU as a C++ extension.

One pass over the input with a branch-free loop the compiler vectorises.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "relu_forward: x must be a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "relu_forward: x must be float32");
  auto input = x.contiguous();
  auto out = torch::empty_like(input);
  const float* src = input.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t n = input.numel();
  for (int64_t i = 0; i < n; ++i) {
    const float v = src[i];
    dst[i] = v > 0.0f ? v : 0.0f;
  }
  return out;
}
"""

relu_ext = load_inline(
    name="example_relu_cpu",
    cpp_sources=cpp_source,
    functions=["relu_forward"],
    extra_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
