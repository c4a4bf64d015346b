"""K1 control on the GPU: BatchNorm with the batch's own statistics, the training-mode function
(one block per channel reduces, then normalises). Required: scored."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/types.h>
#include <c10/cuda/CUDAStream.h>
__global__ void batch_norm(const float* x, float* y, const float* w, const float* b,
                           long batch, long channels, long plane) {
  const long c = blockIdx.x;
  __shared__ double sums[256], squares[256];
  double s = 0.0, q = 0.0;
  for (long k = threadIdx.x; k < batch * plane; k += blockDim.x) {
    const float v = x[((k / plane) * channels + c) * plane + k % plane];
    s += v; q += (double)v * v;
  }
  sums[threadIdx.x] = s; squares[threadIdx.x] = q;
  __syncthreads();
  for (int step = blockDim.x / 2; step > 0; step /= 2) {
    if (threadIdx.x < step) { sums[threadIdx.x] += sums[threadIdx.x + step]; squares[threadIdx.x] += squares[threadIdx.x + step]; }
    __syncthreads();
  }
  const double count = (double)(batch * plane), mean = sums[0] / count;
  const double var = squares[0] / count - mean * mean;
  const float scale = (float)(w[c] / sqrt(var + 1e-5)), shift = (float)(b[c] - mean * scale);
  for (long k = threadIdx.x; k < batch * plane; k += blockDim.x) {
    const long at = ((k / plane) * channels + c) * plane + k % plane;
    y[at] = x[at] * scale + shift;
  }
}
torch::Tensor bn_batch(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = torch::empty_like(x);
  const long plane = x.size(2) * x.size(3);
  batch_norm<<<x.size(1), 256, 0, c10::cuda::getCurrentCUDAStream().stream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(),
      x.size(0), x.size(1), plane);
  return y;
}
"""
ops = load_inline(
    "k1_bn_batch_cuda",
    "torch::Tensor bn_batch(torch::Tensor x, torch::Tensor w, torch::Tensor b);",
    cuda_sources=CUDA,
    functions=["bn_batch"],
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)

    def forward(self, x):
        return ops.bn_batch(x, self.bn.weight, self.bn.bias)
