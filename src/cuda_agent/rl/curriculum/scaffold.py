"""The single-turn kernel tasks' workspace: the harness's binding and ``ModelNew`` around a kernel.

``write_scaffold(problem, spec, backend, workdir, expression)`` (the fill-in task, elementwise
and chain problems) makes an ordinary agent workdir for the problem (``workspace.init``:
SKILL.md, model.py, the fixed binding files, the metadata that names the pristine problem) and
puts the complete solution in it:

* ``kernels/elementwise.cpp`` (cpu backend: a plain C++ loop) or ``kernels/elementwise.cu``
  (cuda: a grid-stride kernel on torch's current stream), whose per-element function
  ``element(float x)`` returns ``expression``;
* ``kernels/elementwise_binding.cpp``: checks the input (float32, on the backend's device),
  allocates the output with ``empty_like`` and calls the kernel (``REGISTER_BINDING``);
* ``model_new.py``: ``ModelNew.forward(x)`` returns ``cuda_extension.elementwise(x)``.

``write_workdir(problem, spec, backend, workdir, kernel, family)`` (the kernel task) writes the
same workdir with ``kernel`` as the whole kernel file ``kernels/NAME.{cu,cpp}``: the model's
``__global__`` function (or C++ loop) and its launch, after ``KERNEL_PRELUDES``. ``NAME`` and
the launch are the family's (``families.kernel_name``, ``families.launch_signature``):
``elementwise_launch(x, y, n)`` for elementwise and chain problems (``LAUNCH_SIGNATURES``),
``rowwise_launch(x, y, rows, cols)`` (y has x's shape) and ``reduce_launch(x, y, rows, cols)``
(y has ``rows`` elements) for the row families, whose binding also checks that x is 2-D
(``binding_source``); ``ModelNew`` calls ``cuda_extension.NAME(x)`` (``model_new_source``).

In the fill-in scaffold everything but the expression is the harness's, so under the ``strict``
policy (only tensor creation and views from torch, a custom kernel in every forward) the
workdir scores 1 or more exactly when the expression computes the reference's element function.
``element_source`` is the function as the prompt shows it, with the hole.

What it does not do: check the expression or the kernel (the compiler and the evaluator do; a
syntax error is a build failure, scored -1 like any other).
"""

from __future__ import annotations

from pathlib import Path

from cuda_agent.core.types import Problem
from cuda_agent.rl.curriculum.families import kernel_name, launch_signature
from cuda_agent.workspace.init import init_workspace

HOLE = "/* your expression */"

LAUNCH_SIGNATURES = {
    backend: launch_signature("elementwise", backend) for backend in ("cpu", "cuda")
}
# What the kernel task's answer is put after: the headers its code may use.
KERNEL_PRELUDES = {
    "cpu": "#include <math.h>\n\n#include <cmath>\n#include <cstdint>\n",
    "cuda": "#include <cuda_runtime.h>\n#include <math.h>\n\n#include <cstdint>\n",
}

SIGNATURES = {
    "cpu": "static inline float element(float x)",
    "cuda": "__device__ __forceinline__ float element(float x)",
}

CPU_KERNEL = """\
// Curriculum fill-in scaffold (cpu): y[i] = element(x[i]) over a float32 buffer. Everything
// but the expression in element() is the harness's.
#include <math.h>

#include <cmath>
#include <cstdint>

{element}
extern "C" void elementwise_launch(const float* x, float* y, int64_t n) {{
  for (int64_t i = 0; i < n; ++i) y[i] = element(x[i]);
}}
"""

CUDA_KERNEL = """\
// Curriculum fill-in scaffold (cuda): y[i] = element(x[i]) over a float32 buffer, one
// grid-stride loop. Everything but the expression in element() is the harness's.
#include <cuda_runtime.h>

#include <cstdint>

namespace {{

{element}
__global__ void elementwise_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   int64_t n) {{
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {{
    y[i] = element(x[i]);
  }}
}}

}}  // namespace

extern "C" cudaError_t elementwise_launch(const float* x, float* y, int64_t n,
                                          cudaStream_t stream) {{
  if (n == 0) return cudaSuccess;
  constexpr int kThreads = 256;
  int64_t blocks = (n + kThreads - 1) / kThreads;
  if (blocks > (1 << 20)) blocks = 1 << 20;
  elementwise_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}}
"""

CPU_BINDING = """\
// Curriculum fill-in scaffold: checks the input, allocates the output, calls the kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>

#include "binding_registry.h"

extern "C" void elementwise_launch(const float* x, float* y, int64_t n);

static torch::Tensor elementwise(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu(), "elementwise: expected a CPU tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "elementwise: expected float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  elementwise_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel());
  return y;
}

static void bind(pybind11::module_& m) {
  m.def("elementwise", &elementwise, "y = element(x), elementwise");
}

REGISTER_BINDING(elementwise, bind);
"""

CUDA_BINDING = """\
// Curriculum fill-in scaffold: checks the input, allocates the output, launches the kernel on
// torch's current stream.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <c10/cuda/CUDAStream.h>

#include "binding_registry.h"

extern "C" cudaError_t elementwise_launch(const float* x, float* y, int64_t n,
                                          cudaStream_t stream);

static torch::Tensor elementwise(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "elementwise: expected a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "elementwise: expected float32");
  auto xc = x.contiguous();
  auto y = torch::empty_like(xc);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(xc.get_device());
  const cudaError_t err =
      elementwise_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.numel(), stream);
  TORCH_CHECK(err == cudaSuccess, "elementwise: ", cudaGetErrorString(err));
  return y;
}

static void bind(pybind11::module_& m) {
  m.def("elementwise", &elementwise, "y = element(x), elementwise");
}

REGISTER_BINDING(elementwise, bind);
"""

MODEL_NEW = '''\
"""Curriculum fill-in scaffold: ModelNew runs the elementwise kernel of kernels/."""

import cuda_extension
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.elementwise(x)
'''

# The row families' binding: @NAME@ (rowwise, reduce), @ALLOC@ (y), @DEVICE_CHECK@, @CALL@.
ROW_BINDING = """\
// Curriculum kernel scaffold: checks the input (2-D float32), allocates y, calls the kernel.
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
@INCLUDE@
#include "binding_registry.h"

@SIGNATURE@;

static torch::Tensor @NAME@(torch::Tensor x) {
  TORCH_CHECK(@DEVICE_CHECK@, "@NAME@: expected a @DEVICE@ tensor");
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "@NAME@: expected float32");
  TORCH_CHECK(x.dim() == 2, "@NAME@: expected a 2-D tensor (rows x cols)");
  auto xc = x.contiguous();
  auto y = @ALLOC@;
@CALL@
  return y;
}

static void bind(pybind11::module_& m) {
  m.def("@NAME@", &@NAME@, "@DOC@");
}

REGISTER_BINDING(@NAME@, bind);
"""
ROW_ALLOC = {
    "rowwise": "torch::empty_like(xc)",
    "reduce": "torch::empty({xc.size(0)}, xc.options())",
}
ROW_DOC = {
    "rowwise": "y = f(x), each row of y from the same row of x",
    "reduce": "y[r] = f(row r of x), one value per row",
}
CPU_CALL = "  @NAME@_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0), xc.size(1));"
CUDA_CALL = """\
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(xc.get_device());
  const cudaError_t err = @NAME@_launch(xc.data_ptr<float>(), y.data_ptr<float>(), xc.size(0),
                                        xc.size(1), stream);
  TORCH_CHECK(err == cudaSuccess, "@NAME@: ", cudaGetErrorString(err));"""


def element_source(backend: str, expression: str = HOLE) -> str:
    """The per-element function of the kernel (with the hole, by default)."""
    return f"{SIGNATURES[backend]} {{\n  return {expression};\n}}\n"


def kernel_source(backend: str, expression: str) -> str:
    template = CUDA_KERNEL if backend == "cuda" else CPU_KERNEL
    return template.format(element=element_source(backend, expression))


def write_scaffold(
    problem: Problem, problem_spec: str, backend: str, workdir: Path, expression: str
) -> Path:
    """A workdir for ``problem`` whose kernel computes ``expression`` per element."""
    kernel = kernel_source(backend, expression)
    return write_workdir(problem, problem_spec, backend, workdir, kernel)


def binding_source(family: str, backend: str) -> str:
    """The harness's binding of ``family``'s kernel on ``backend``."""
    name = kernel_name(family)
    if name == "elementwise":
        return CUDA_BINDING if backend == "cuda" else CPU_BINDING
    cuda = backend == "cuda"
    values = {
        "@INCLUDE@": "#include <c10/cuda/CUDAStream.h>\n" if cuda else "",
        "@SIGNATURE@": launch_signature(family, backend),
        "@DEVICE_CHECK@": "x.is_cuda()" if cuda else "x.device().is_cpu()",
        "@DEVICE@": "CUDA" if cuda else "CPU",
        "@ALLOC@": ROW_ALLOC[name],
        "@CALL@": CUDA_CALL if cuda else CPU_CALL,
        "@DOC@": ROW_DOC[name],
    }
    text = ROW_BINDING
    for key, value in values.items():
        text = text.replace(key, value)
    return text.replace("@NAME@", name)


def model_new_source(family: str) -> str:
    """``model_new.py`` of ``family``'s scaffold: ``ModelNew`` calls the family's binding."""
    name = kernel_name(family)
    text = MODEL_NEW.replace("cuda_extension.elementwise(x)", f"cuda_extension.{name}(x)")
    return text.replace("runs the elementwise kernel", f"runs the {name} kernel")


def write_workdir(
    problem: Problem,
    problem_spec: str,
    backend: str,
    workdir: Path,
    kernel: str,
    family: str = "elementwise",
) -> Path:
    """A workdir for ``problem`` with ``kernel`` as ``kernels/NAME.{cu,cpp}`` (``NAME``:
    ``families.kernel_name(family)``; it must define the launch ``families.launch_signature``
    declares) and the harness's binding and ``ModelNew``."""
    init_workspace(problem, workdir, backend, problem_spec)
    extension = "cu" if backend == "cuda" else "cpp"
    name = kernel_name(family)
    kernels = workdir / "kernels"
    (kernels / f"{name}.{extension}").write_text(kernel, encoding="utf-8")
    (kernels / f"{name}_binding.cpp").write_text(binding_source(family, backend), encoding="utf-8")
    (workdir / "model_new.py").write_text(model_new_source(family), encoding="utf-8")
    return workdir
