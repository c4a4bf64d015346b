"""Example solution (cuda backend, KernelBench single file): tanh(x * scale + y) in one CUDA pass.

2-D grid: grid.x spans the columns (a float4 per thread when cols % 4 == 0 and every buffer is
16-byte aligned, else one float), grid.y strides over the rows. Each thread loads its slice of
`scale` once and reuses it for every row it visits; row accesses are coalesced. Launched on
PyTorch's current stream.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
torch::Tensor scale_residual_tanh(torch::Tensor x, torch::Tensor y, torch::Tensor scale);
"""

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>  // current stream; needs only the CUDA runtime headers

#include <algorithm>
#include <cstdint>

constexpr int kThreads = 256;
constexpr int64_t kMaxGridY = 65535;

__device__ __forceinline__ float srt(float x, float s, float y) { return tanhf(fmaf(x, s, y)); }

__global__ void scale_residual_tanh_vec4(const float4* __restrict__ x, const float4* __restrict__ y,
                                         const float4* __restrict__ scale,
                                         float4* __restrict__ out, int64_t rows, int64_t cols4) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols4) return;
  const float4 s = scale[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * cols4 + c;
    const float4 a = x[i];
    const float4 b = y[i];
    out[i] = make_float4(srt(a.x, s.x, b.x), srt(a.y, s.y, b.y), srt(a.z, s.z, b.z),
                         srt(a.w, s.w, b.w));
  }
}

__global__ void scale_residual_tanh_scalar(const float* __restrict__ x, const float* __restrict__ y,
                                           const float* __restrict__ scale,
                                           float* __restrict__ out, int64_t rows, int64_t cols) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  const float s = scale[c];
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const int64_t i = r * cols + c;
    out[i] = srt(x[i], s, y[i]);
  }
}

static bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

torch::Tensor scale_residual_tanh(torch::Tensor x, torch::Tensor y, torch::Tensor scale) {
  TORCH_CHECK(x.is_cuda() && y.is_cuda() && scale.is_cuda(),
              "scale_residual_tanh: expected CUDA tensors");
  TORCH_CHECK(y.device() == x.device() && scale.device() == x.device(),
              "scale_residual_tanh: tensors on different devices");
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
  if (rows == 0 || cols == 0) return out;

  const float* xp = x.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  const float* sp = scale.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const bool vec = cols % 4 == 0 && aligned16(xp) && aligned16(yp) && aligned16(sp) &&
                   aligned16(op);
  const int64_t units = vec ? cols / 4 : cols;  // column groups, one per thread
  const int64_t grid_x = (units + kThreads - 1) / kThreads;

  // Aim for ~8 blocks per SM in total; each block then loops over rows / grid.y rows.
  int sms = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
  const int64_t grid_y = std::min({(sms * int64_t{8} + grid_x - 1) / grid_x, rows, kMaxGridY});
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.get_device());

  if (vec) {
    scale_residual_tanh_vec4<<<grid, kThreads, 0, stream>>>(
        reinterpret_cast<const float4*>(xp), reinterpret_cast<const float4*>(yp),
        reinterpret_cast<const float4*>(sp), reinterpret_cast<float4*>(op), rows, units);
  } else {
    scale_residual_tanh_scalar<<<grid, kThreads, 0, stream>>>(xp, yp, sp, op, rows, cols);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

scale_residual_tanh_ext = load_inline(
    name="example_scale_residual_tanh_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scale_residual_tanh"],
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.empty(dim))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scale_residual_tanh_ext.scale_residual_tanh(x, y, self.scale)
