"""A correct kernel-task answer for any curriculum problem: the kernel file the model writes.

``reference_kernel(problem, backend)`` takes a problem (a ``Problem`` or a row of a split)
and returns the code of a correct kernel file: what a kernel-task reply holds, to be put
after ``scaffold.KERNEL_PRELUDES`` and defining the family's launch
(``families.launch_signature``). The problem is drawn again from its id
(``families.candidate_of``) and checked against its expression, so a folder built by another
version of the curriculum is refused rather than answered wrongly.

* ``elementwise`` and ``chain``: the fill-in scaffold's kernel with the reference C expression
  (``scaffold.kernel_source``);
* ``rowwise`` and ``reduction``: on cpu, plain loops per row (sums in double); on cuda, one
  block of 256 threads per row (a grid-stride loop over rows), each pass over the row a
  block-stride loop and a warp-shuffle and shared-memory reduction. The elementwise ops before
  and after the row op are ``pre(x)`` and ``post(x)``, from ``ops.OPS``' C templates. Each row
  op is a list of passes over the row (a max, a sum...) and the expression of each output
  element (``PASSES``).

Used by tests (every reference kernel is compiled and compared with PyTorch, and scored by the
evaluator) and by callers that want a known-good answer (a demonstration, a sanity check).

What it does not do: run or time anything, or write the fastest kernel (the examples of the
prompts are simpler still).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cuda_agent.core.types import Problem
from cuda_agent.rl.curriculum.families import (
    FamilyError,
    candidate_of,
    forward_expression,
    launch_name,
)
from cuda_agent.rl.curriculum.ops import Composition, apply_steps
from cuda_agent.rl.curriculum.row_ops import RowProblem
from cuda_agent.rl.curriculum.scaffold import kernel_source

# Per row op: the passes over the row, (kind, term of v = pre(x), name, value from the pass's
# total ``{t}``), then (rowwise) each output element, or (reduction) the name of the result.
Pass = tuple[str, str, str, str]
PASSES: dict[str, tuple[tuple[Pass, ...], str]] = {
    "softmax": (
        (("max", "v", "m", "{t}"), ("sum", "expf(v - m)", "scale", "(float)cols / {t}")),
        "expf(v - m) * scale",
    ),
    "log_softmax": (
        (("max", "v", "m", "{t}"), ("sum", "expf(v - m)", "lse", "m + logf({t})")),
        "v - lse",
    ),
    "layer_norm": (
        (
            ("sum", "v", "mean", "{t} / (float)cols"),
            ("sum", "(v - mean) * (v - mean)", "inv", "1.0f / sqrtf({t} / (float)cols + 1e-5f)"),
        ),
        "(v - mean) * inv",
    ),
    "rms_norm": ((("sum", "v * v", "inv", "1.0f / sqrtf({t} / (float)cols + 1e-5f)"),), "v * inv"),
    "l2_normalize": ((("sum", "v * v", "norm", "fmaxf(sqrtf({t}), 1e-12f)"),), "v / norm"),
    "sum": ((("sum", "v", "out", "{t}"),), "out"),
    "mean": ((("sum", "v", "out", "{t} / (float)cols"),), "out"),
    "amax": ((("max", "v", "out", "{t}"),), "out"),
    "amin": ((("min", "v", "out", "{t}"),), "out"),
    "sum_squares": ((("sum", "v * v", "out", "{t}"),), "out"),
    "l2_norm": ((("sum", "v * v", "out", "sqrtf({t})"),), "out"),
}
IDENTITY = {"sum": "0.0f", "max": "-INFINITY", "min": "INFINITY"}
_COMBINE = {"sum": "{a} + {b}", "max": "fmaxf({a}, {b})", "min": "fminf({a}, {b})"}
_KIND = {"sum": "kSum", "max": "kMax", "min": "kMin"}

CUDA_HELPERS = """\
constexpr int kThreads = 256;
enum Kind { kSum, kMax, kMin };

template <int K>
__device__ __forceinline__ float combine(float a, float b) {
  return K == kSum ? a + b : (K == kMax ? fmaxf(a, b) : fminf(a, b));
}

template <int K>
__device__ __forceinline__ float identity() {
  return K == kSum ? 0.0f : (K == kMax ? -INFINITY : INFINITY);
}

// The block's reduction of every thread's v (every thread gets it).
template <int K>
__device__ float block_reduce(float v, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v = combine<K>(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  __syncthreads();  // the previous reduction's result has been read
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? shared[lane] : identity<K>();
    for (int offset = 16; offset > 0; offset >>= 1) {
      v = combine<K>(v, __shfl_down_sync(0xffffffffu, v, offset));
    }
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}
"""


def reference_kernel(problem: Problem | Mapping[str, Any], backend: str) -> str:
    """A correct kernel file for ``problem`` (a ``Problem`` or a split's row) on ``backend``
    (``cpu`` or ``cuda``)."""
    candidate = checked_candidate(problem)
    if isinstance(candidate, Composition):
        return kernel_source(backend, candidate.c_expr)
    return row_kernel(candidate, backend)


def checked_candidate(problem: Problem | Mapping[str, Any]) -> Composition | RowProblem:
    """The problem drawn again from its id, refused unless its expression is the problem's
    (a folder built by another version of the curriculum)."""
    if isinstance(problem, Problem):
        problem_id, expression = problem.id, forward_expression(problem.source)
    else:
        problem_id, expression = str(problem["id"]), str(problem["torch_expr"])
    candidate = candidate_of(problem_id)
    if candidate.torch_expr != expression:
        raise FamilyError(
            f"{problem_id}: y = {expression} is not what this version of the curriculum draws "
            f"for the id (y = {candidate.torch_expr}): a set built by another version"
        )
    return candidate


def row_kernel(problem: RowProblem, backend: str) -> str:
    """The kernel file of a row-wise or reduction problem."""
    passes, output = PASSES[problem.op]
    launch = launch_name(problem.family)
    kernel = launch.removesuffix("_launch") + "_kernel"
    reduction = problem.family == "reduction"
    cuda = backend == "cuda"
    qualifier = "__device__ __forceinline__" if cuda else "static inline"
    lines = [
        # what the prompt states, nothing the model could not know: these files are also
        # training replies (``sampling.reference_samples``), where an id or a "reference"
        # header would be learned and written back
        f"// y = {problem.torch_expr}",
        "namespace {",
        "",
        f"{qualifier} float pre(float x) {{ return {apply_steps(problem.pre).c_expr}; }}",
    ]
    if not reduction:
        post = apply_steps(problem.post).c_expr
        lines.append(f"{qualifier} float post(float x) {{ return {post}; }}")
    lines.append("")
    body = _cuda_body(passes, output, reduction) if cuda else _cpu_body(passes, output, reduction)
    if cuda:
        lines += [CUDA_HELPERS]
        lines += [
            f"__global__ void {kernel}(const float* __restrict__ x, float* __restrict__ y,",
            "                          int64_t rows, int64_t cols) {",
            "  __shared__ float shared[32];",
            "  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {",
            "    const float* xr = x + row * cols;",
            *body,
            "  }",
            "}",
            "",
            "}  // namespace",
            "",
            f'extern "C" cudaError_t {launch}(const float* x, float* y, int64_t rows, '
            "int64_t cols, cudaStream_t stream) {",
            "  if (rows == 0) return cudaSuccess;",
            "  const int64_t blocks = rows < 65535 ? rows : 65535;",
            f"  {kernel}<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>"
            "(x, y, rows, cols);",
            "  return cudaGetLastError();",
            "}",
        ]
    else:
        lines += [
            "}  // namespace",
            "",
            f'extern "C" void {launch}(const float* x, float* y, int64_t rows, int64_t cols) {{',
            "  for (int64_t row = 0; row < rows; ++row) {",
            "    const float* xr = x + row * cols;",
            *body,
            "  }",
            "}",
        ]
    return "\n".join(lines) + "\n"


def _cpu_body(passes: tuple[Pass, ...], output: str, reduction: bool) -> list[str]:
    out = []
    for index, (kind, term, name, value) in enumerate(passes):
        acc = f"acc{index}"
        if kind == "sum":
            out.append(f"    double {acc} = 0.0;")
            update = f"{acc} += {term};"
        else:
            out.append(f"    float {acc} = {IDENTITY[kind]};")
            update = f"{acc} = {_COMBINE[kind].format(a=acc, b=term)};"
        out += [
            "    for (int64_t c = 0; c < cols; ++c) {",
            "      const float v = pre(xr[c]);",
            f"      {update}",
            "    }",
            f"    const float {name} = {value.format(t=f'(float){acc}')};",
        ]
    if reduction:
        return [*out, f"    y[row] = {output};"]
    return [
        *out,
        "    float* yr = y + row * cols;",
        "    for (int64_t c = 0; c < cols; ++c) {",
        "      const float v = pre(xr[c]);",
        f"      yr[c] = post({output});",
        "    }",
    ]


def _cuda_body(passes: tuple[Pass, ...], output: str, reduction: bool) -> list[str]:
    loop = "for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {"
    out = []
    for index, (kind, term, name, value) in enumerate(passes):
        acc = f"acc{index}"
        out += [
            f"    float {acc} = {IDENTITY[kind]};",
            f"    {loop}",
            "      const float v = pre(xr[c]);",
            f"      {acc} = {_COMBINE[kind].format(a=acc, b=term)};",
            "    }",
            f"    const float {name} = "
            + value.format(t=f"block_reduce<{_KIND[kind]}>({acc}, shared)")
            + ";",
        ]
    if reduction:
        return [*out, f"    if (threadIdx.x == 0) y[row] = {output};"]
    return [
        *out,
        "    float* yr = y + row * cols;",
        f"    {loop}",
        "      const float v = pre(xr[c]);",
        f"      yr[c] = post({output});",
        "    }",
    ]
