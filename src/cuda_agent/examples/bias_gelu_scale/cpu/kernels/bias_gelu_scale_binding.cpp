// Binding: checks tensors, allocates the output, calls the plain C++ kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

extern "C" void bias_gelu_scale_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale);

static torch::Tensor bias_gelu_scale(torch::Tensor x, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.device().is_cpu() && bias.device().is_cpu(), "expected CPU tensors");
  TORCH_CHECK(x.scalar_type() == torch::kFloat && bias.scalar_type() == torch::kFloat,
              "expected float32 tensors");
  TORCH_CHECK(x.dim() == 2 && bias.dim() == 1 && bias.size(0) == x.size(1),
              "expected x of shape (rows, cols) and bias of shape (cols)");
  auto xc = x.contiguous();
  auto bc = bias.contiguous();
  auto y = torch::empty_like(xc);
  bias_gelu_scale_launch(xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(),
                         xc.size(0), xc.size(1), static_cast<float>(scale));
  return y;
}

static void bind(pybind11::module_& m) {
  m.def("bias_gelu_scale", &bias_gelu_scale, "gelu(x + bias) * scale, fused");
}

REGISTER_BINDING(bias_gelu_scale, bind);
