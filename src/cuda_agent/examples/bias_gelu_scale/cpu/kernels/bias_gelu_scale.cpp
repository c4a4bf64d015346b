// Fused y = gelu(x + bias) * scale over a row-major (rows x cols) matrix, one pass.
// Plain C++ with no torch headers, so it compiles in well under a second.
#include <cmath>
#include <cstdint>

extern "C" void bias_gelu_scale_launch(const float* x, const float* bias, float* y,
                                       int64_t rows, int64_t cols, float scale) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = xr[c] + bias[c];
      yr[c] = 0.5f * v * (1.0f + std::erf(v * kInvSqrt2)) * scale;
    }
  }
}
