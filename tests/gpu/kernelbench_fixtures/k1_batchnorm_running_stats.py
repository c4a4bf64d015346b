"""K1 on the GPU: BatchNorm folded with its running statistics (inference semantics) for a
problem KernelBench runs in training mode. Required: rejected (output_mismatch:value)."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
__global__ void folded(const float* x, float* y, const float* w, const float* b, const float* m,
                       const float* v, long plane, long channels, long n) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  long c = (i / plane) % channels;
  float scale = w[c] * rsqrtf(v[c] + 1e-5f);
  y[i] = (x[i] - m[c]) * scale + b[c];
}
torch::Tensor bn_folded(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor m, torch::Tensor v) {
  auto y = torch::empty_like(x);
  const long n = x.numel(), plane = x.size(2) * x.size(3);
  folded<<<(n + 255) / 256, 256, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
      m.data_ptr<float>(), v.data_ptr<float>(), plane, x.size(1), n);
  return y;
}
"""
ops = load_inline(
    "k1_bn_folded_cuda",
    "torch::Tensor bn_folded(torch::Tensor x, torch::Tensor w, torch::Tensor b, torch::Tensor m, torch::Tensor v);",
    cuda_sources=CUDA,
    functions=["bn_folded"],
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x):
        bn = self.bn
        return ops.bn_folded(x, bn.weight, bn.bias, bn.running_mean, bn.running_var)
