"""The kernel rung's prompts: the contract of each family's kernel and one worked example.

``kernel_prompt(family, backend)`` returns the system turn (what x and y hold, the launch
function's signature from ``families.launch_signature``, what the harness includes and
allocates) and the one-shot example: a PyTorch expression and a whole kernel file for it.
Elementwise and chain problems share ``elementwise_launch(x, y, n)`` and the example
``torch.exp(x) - 1.0``; row-wise problems get ``rowwise_launch(x, y, rows, cols)`` and
``x - x.mean(dim=-1, keepdim=True)`` (one block per row and a shared-memory sum on cuda);
reduction problems ``reduce_launch(x, y, rows, cols)`` and ``torch.exp(x).sum(dim=-1)``. No
example is a curriculum problem (``exp`` is not an op of ``ops.OPS``, and no row op centres a
row), so an example is never the answer.

What it does not do: assemble the chat (``tasks.messages``), or check a reply
(``tasks.extract_kernel``).
"""

from __future__ import annotations

from cuda_agent.rl.curriculum.families import kernel_name, launch_signature

_HARNESS = {
    "cuda": "The harness includes cuda_runtime.h, math.h and cstdint, allocates y and calls "
    "{name}_launch. Reply with the code in one ```cuda code block.",
    "cpu": "The harness includes math.h, cmath and cstdint, allocates y and calls {name}_launch. "
    "Reply with the code in one ```cpp code block.",
}
_MATRIX = "x is a float32 matrix of rows x cols (row-major);"
_WHAT = {
    "rowwise": f"{_MATRIX} y = f(x) has the same shape, each row of y computed from the same "
    "row of x (reductions over the row, such as a max, a sum or a mean, then a pass over it).",
    "reduce": f"{_MATRIX} y = f(x) reduces each row: y has rows elements, y[r] computed from row "
    "r of x.",
}
_WRITE = {
    "cuda": "Write a __global__ kernel and its launch function {launch}, which launches the "
    "kernel on `stream` and returns cudaGetLastError().",
    "cpu": "Write the function {launch}, loops that compute every {element}.",
}

# The elementwise rung's prompt, as it always was.
KERNEL_SYSTEM = {
    "cuda": """\
You write CUDA kernels. For y = f(x) over n float32 elements, write a __global__ kernel and \
its launch function {launch}, which launches the kernel on `stream` and returns \
cudaGetLastError(). The harness includes cuda_runtime.h, math.h and cstdint, allocates y and \
calls elementwise_launch. Reply with the code in one ```cuda code block.""",
    "cpu": """\
You write C++ kernels. For y = f(x) over n float32 elements, write the function {launch}, a \
loop that computes every y[i]. The harness includes math.h, cmath and cstdint, allocates y and \
calls elementwise_launch. Reply with the code in one ```cpp code block.""",
}
KERNEL_EXAMPLE_TORCH = "torch.exp(x) - 1.0"
KERNEL_EXAMPLES = {
    "cuda": """\
__global__ void elementwise_kernel(const float* x, float* y, int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    y[i] = expf(v) - 1.0f;
  }
}

extern "C" cudaError_t elementwise_launch(const float* x, float* y, int64_t n,
                                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  elementwise_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
""",
    "cpu": """\
extern "C" void elementwise_launch(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = expf(v) - 1.0f;
  }
}
""",
}

# The row families' examples: @SUM_TERM@ is what a row sums, @STORE@ what it writes.
_CUDA_ROW_EXAMPLE = """\
__global__ void @NAME@_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  __shared__ float partial[256];
  const int64_t row = blockIdx.x;
  const float* xr = x + row * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += @SUM_TERM@;
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
@STORE@
}

extern "C" cudaError_t @NAME@_launch(const float* x, float* y, int64_t rows, int64_t cols,
                                    cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  @NAME@_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, y, rows, cols);
  return cudaGetLastError();
}
"""
_CPU_ROW_EXAMPLE = """\
extern "C" void @NAME@_launch(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += @SUM_TERM@;
@STORE@
  }
}
"""
_ROW_EXAMPLES = {
    "rowwise": (
        "x - x.mean(dim=-1, keepdim=True)",
        "xr[c]",
        {
            "cuda": "  const float mean = partial[0] / (float)cols;\n"
            "  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) "
            "y[row * cols + c] = xr[c] - mean;",
            "cpu": "    const float mean = sum / (float)cols;\n"
            "    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = xr[c] - mean;",
        },
    ),
    "reduce": (
        "torch.exp(x).sum(dim=-1)",
        "expf(xr[c])",
        {
            "cuda": "  if (threadIdx.x == 0) y[row] = partial[0];",
            "cpu": "    y[r] = sum;",
        },
    ),
}


def kernel_prompt(family: str, backend: str) -> tuple[str, str, str]:
    """The kernel rung's system turn for ``family`` on ``backend``, and its example: the
    PyTorch expression and the kernel file that answers it."""
    name = kernel_name(family)
    launch = launch_signature(family, backend)
    if name == "elementwise":
        return (
            KERNEL_SYSTEM[backend].format(launch=launch),
            KERNEL_EXAMPLE_TORCH,
            (KERNEL_EXAMPLES[backend]),
        )
    language = "CUDA" if backend == "cuda" else "C++"
    element = "y[r * cols + c]" if name == "rowwise" else "y[r]"
    system = " ".join(
        (
            f"You write {language} kernels.",
            _WHAT[name],
            _WRITE[backend].format(launch=launch, element=element),
            _HARNESS[backend].format(name=name),
        )
    )
    torch_expr, term, stores = _ROW_EXAMPLES[name]
    template = _CUDA_ROW_EXAMPLE if backend == "cuda" else _CPU_ROW_EXAMPLE
    code = template.replace("@SUM_TERM@", term).replace("@STORE@", stores[backend])
    return system, torch_expr, code.replace("@NAME@", name)
