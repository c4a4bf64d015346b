"""Example solution (cuda backend, KernelBench single file): ReLU as a CUDA extension.

A grid-stride kernel reads and writes float4 (16 bytes per thread per step) when both buffers
are 16-byte aligned, with a scalar loop for the last numel % 4 elements; misaligned tensors fall
back to the scalar loop. Launched on PyTorch's current stream.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor relu_forward(torch::Tensor x);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>  // current stream; needs only the CUDA runtime headers

#include <algorithm>
#include <cstdint>

// `v < 0 ? 0 : v` keeps NaN as NaN, like torch.relu.
__device__ __forceinline__ float relu1(float v) { return v < 0.0f ? 0.0f : v; }

// Elements [0, vec_count * 4) as float4 (when vec_count > 0), then the rest one at a time.
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n,
                            int64_t vec_count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* y4 = reinterpret_cast<float4*>(y);
  for (int64_t i = first; i < vec_count; i += stride) {
    float4 v = x4[i];
    v.x = relu1(v.x);
    v.y = relu1(v.y);
    v.z = relu1(v.z);
    v.w = relu1(v.w);
    y4[i] = v;
  }
  for (int64_t i = vec_count * 4 + first; i < n; i += stride) {
    y[i] = relu1(x[i]);
  }
}

torch::Tensor relu_forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "relu_forward: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "relu_forward: x must be float32");
  TORCH_CHECK(x.is_contiguous(), "relu_forward: x must be contiguous");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;

  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  const bool aligned = (reinterpret_cast<uintptr_t>(src) % 16 == 0) &&
                       (reinterpret_cast<uintptr_t>(dst) % 16 == 0);
  const int64_t vec_count = aligned ? n / 4 : 0;

  // Enough blocks to fill every SM a few times over; the grid-stride loop covers the rest.
  constexpr int kThreads = 256;
  const int64_t work = vec_count > 0 ? vec_count : n;
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
  const int64_t max_blocks = static_cast<int64_t>(sms) * 8;
  const int blocks =
      static_cast<int>(std::min<int64_t>((work + kThreads - 1) / kThreads, max_blocks));

  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.get_device());
  relu_kernel<<<blocks, kThreads, 0, stream>>>(src, dst, n, vec_count);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

relu_ext = load_inline(
    name="example_relu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
