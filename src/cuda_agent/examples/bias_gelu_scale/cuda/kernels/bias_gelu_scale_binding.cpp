// Binding: checks tensors, allocates the output, launches the CUDA kernel on torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>  // current stream; needs only the CUDA runtime headers

#include "binding_registry.h"

extern "C" cudaError_t bias_gelu_scale_launch(const float* x, const float* bias, float* y,
                                              int64_t rows, int64_t cols, float scale,
                                              cudaStream_t stream);

static torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_gelu_scale: expected CUDA tensors");
  TORCH_CHECK(x.device() == bias.device(), "bias_gelu_scale: x and bias on different devices");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && bias.scalar_type() == torch::kFloat,
              "bias_gelu_scale: expected float32 tensors");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && bias.size(0) == x.size(1),
              "bias_gelu_scale: expected x of shape (rows, cols) and bias of shape (cols)");
  TORCH_CHECK(x.is_contiguous() && bias.is_contiguous(),
              "bias_gelu_scale: expected contiguous tensors");
  auto y = torch::empty_like(x);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.get_device());
  const cudaError_t err =
      bias_gelu_scale_launch(x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(),
                             x.size(0), x.size(1), static_cast<float>(scale), stream);
  TORCH_CHECK(err == cudaSuccess, "bias_gelu_scale: ", cudaGetErrorString(err));
  return y;
}

static void bind(pybind11::module_& m) {
  m.def("bias_gelu_scale", &bias_gelu_scale, "gelu(x + bias) * scale, fused (exact erf GELU)");
}

REGISTER_BINDING(bias_gelu_scale, bind);
