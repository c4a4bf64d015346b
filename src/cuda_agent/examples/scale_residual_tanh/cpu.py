"""Example solution (cpu backend, KernelBench single file): tanh(x * scale + y) as a C++ extension.

One fused pass over the two (rows x cols) inputs instead of eager's three (mul, add, tanh).
With -ffast-math, g++ vectorises the std::tanh loop by calling glibc's SIMD tanhf (libmvec,
linked through -lm); -march=native picks the widest vector unit of the build machine.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

#include <cmath>

torch::Tensor scale_residual_tanh(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
  TORCH_CHECK(x.device().is_cpu() && y.device().is_cpu() && scale.device().is_cpu(),
              "scale_residual_tanh: expected CPU tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && y.scalar_type() == torch::kFloat &&
                  scale.scalar_type() == torch::kFloat,
              "scale_residual_tanh: expected float32 tensors");
  TORCH_CHECK(x.dim() == 2 && y.sizes() == x.sizes() && scale.dim() == 1 &&
                  scale.size(0) == x.size(1),
              "scale_residual_tanh: expected x, y of shape (rows, cols) and scale of shape (cols)");
  TORCH_CHECK(x.is_contiguous() && y.is_contiguous() && scale.is_contiguous(),
              "scale_residual_tanh: expected contiguous tensors");
  auto out = torch::empty_like(x);
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  const float* xp = x.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  const float* sp = scale.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xp + r * cols;
    const float* yr = yp + r * cols;
    float* outr = op + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      outr[c] = std::tanh(xr[c] * sp[c] + yr[c]);
    }
  }
  return out;
}
"""

scale_residual_tanh_ext = load_inline(
    name="example_scale_residual_tanh_cpu",
    cpp_sources=cpp_source,
    functions=["scale_residual_tanh"],
    extra_cflags=["-O3", "-ffast-math", "-march=native"],
    extra_ldflags=["-lm"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scale_residual_tanh_ext.scale_residual_tanh(x, y, self.scale)
