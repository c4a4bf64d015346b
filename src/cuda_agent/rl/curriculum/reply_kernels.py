"""Short correct kernel-task replies for any curriculum problem: a cold-start set to train on.

``reply_kernel(problem, backend)`` returns a correct kernel file for a curriculum problem, in
the prompt's own short style (``kernel_prompts``' worked examples), short enough to be a reply
the model can write within its token budget (``kernel_learning``'s 384 new tokens).
``reference.reference_kernel`` is the long form (a 256-thread block a row, warp-shuffle and
shared-memory reductions: 2,100-2,700 characters, 700-900 tokens, for a row problem): a model
trained on it would be cut off mid-kernel. On Qwen2.5-Coder's tokenizer these files take
160-260 tokens for elementwise and chain problems, 230-290 for reductions and 300-450 for
row-wise ones; the two-pass row ops (softmax, log_softmax, layer_norm) run 400-450, over
384, which is why their held-out replies need 512 (docs/benchmarks.md, the fourth run).

* ``elementwise`` and ``chain``: the worked example's kernel (one thread an element, bounds
  check) calling ``f``, a ``__device__`` function applying the problem's ops one statement
  each (nested, an operand would repeat as often as an op's template names it);
* ``rowwise`` and ``reduction`` on cuda: one warp per row (32 threads a block, a block a row,
  an ``int`` column index: rows of fewer than 2^31 columns, as every curriculum problem's):
  each pass over the row a lane-stride loop and an ``__shfl_xor_sync`` butterfly, which
  leaves the total in every lane, so no shared memory and no ``__syncthreads``; the
  elementwise ops before and after the row op are ``f(x)`` and ``g(x)``; the passes and the
  output come from ``reference.PASSES``, so both forms compute the same thing (up to
  rounding: ``rsqrtf`` for ``1 / sqrtf``);
* on cpu: ``reference.reference_kernel`` (plain loops, already short).

No file names its problem, not even its expression, which the prompt states: an id or a
"reference" header would be learned and written back.

What it does not do: score the replies (``sampling.reference_samples``), or write the fastest
kernel (one warp a row leaves most of an SM idle on short rows).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cuda_agent.core.types import Problem
from cuda_agent.rl.curriculum.families import kernel_name, launch_signature
from cuda_agent.rl.curriculum.ops import Composition, apply_steps
from cuda_agent.rl.curriculum.reference import (
    IDENTITY,
    PASSES,
    checked_candidate,
    reference_kernel,
)
from cuda_agent.rl.curriculum.row_ops import RowProblem

_UPDATE = {"sum": "{a} += {b};", "max": "{a} = fmaxf({a}, {b});", "min": "{a} = fminf({a}, {b});"}
_LANES = "for (int c = threadIdx.x; c < cols; c += 32)"


def reply_kernel(problem: Problem | Mapping[str, Any], backend: str) -> str:
    """A short correct kernel file for ``problem`` (a ``Problem`` or a split's row) on
    ``backend`` (module docstring)."""
    if backend != "cuda":
        return reference_kernel(problem, backend)
    candidate = checked_candidate(problem)
    if isinstance(candidate, Composition):
        return _elementwise(candidate)
    return _row(candidate)


def _elementwise(candidate: Composition) -> str:
    kernel = kernel_name("elementwise") + "_kernel"
    return f"""\
{_function("f", candidate.steps)}

__global__ void {kernel}(const float* x, float* y, int64_t n) {{
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]);
}}

{launch_signature("elementwise", "cuda")} {{
  if (n > 0) {kernel}<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}}
"""


def _function(name: str, steps: tuple[tuple[str, float | None], ...]) -> str:
    """``__device__ float NAME(float x)``: the elementwise steps, innermost first, one
    statement each (nesting them repeats an operand as often as a template names it)."""
    if len(steps) == 1:
        return f"__device__ float {name}(float x) {{ return {apply_steps(steps).c_expr}; }}"
    body = "".join(f"  x = {apply_steps((step,)).c_expr};\n" for step in steps)
    return f"__device__ float {name}(float x) {{\n{body}  return x;\n}}"


def _shorter(value: str) -> str:
    """A pass's value in fewer tokens, the same arithmetic up to rounding: ``cols`` converts to
    float by itself, and ``rsqrtf`` is the reciprocal square root."""
    value = value.replace("(float)cols", "cols")
    if value.startswith("1.0f / sqrtf(") and value.endswith(")"):
        value = "rsqrtf(" + value.removeprefix("1.0f / sqrtf(")
    return value


def _row(problem: RowProblem) -> str:
    passes, output = PASSES[problem.op]
    reduction = problem.family == "reduction"
    kernel = kernel_name(problem.family) + "_kernel"
    lines = []
    read = "x[c]"
    if problem.pre:
        lines.append(_function("f", problem.pre))
        read = "f(x[c])"
    post = ""
    if problem.post:
        lines.append(_function("g", problem.post))
        post = "g"
    lines += [
        *([""] if lines else []),
        f"__global__ void {kernel}(const float* x, float* y, int64_t rows, int64_t cols) {{",
        "  x += (int64_t)blockIdx.x * cols;",
    ]
    for index, (kind, term, name, value) in enumerate(passes):
        value = _shorter(value)
        acc = f"a{index}"
        lines.append(f"  float {acc} = {IDENTITY[kind]};")
        if term == "v":
            lines.append(f"  {_LANES} {_UPDATE[kind].format(a=acc, b=read)}")
        else:
            update = _UPDATE[kind].format(a=acc, b=term)
            lines.append(f"  {_LANES} {{ const float v = {read}; {update} }}")
        shuffle = _UPDATE[kind].format(a=acc, b=f"__shfl_xor_sync(0xffffffff, {acc}, o)")
        lines.append(f"  for (int o = 16; o > 0; o >>= 1) {shuffle}")
        if reduction and name == output:  # the last pass's value is the row's result
            lines.append(f"  if (threadIdx.x == 0) y[blockIdx.x] = {value.format(t=acc)};")
        else:
            lines.append(f"  const float {name} = {value.format(t=acc)};")
    if not reduction:
        lines += [
            "  y += (int64_t)blockIdx.x * cols;",
            f"  {_LANES} {{ const float v = {read}; y[c] = {post}({output}); }}",
        ]
    lines += [
        "}",
        "",
        f"{launch_signature(problem.family, 'cuda')} {{",
        f"  if (rows > 0) {kernel}<<<(unsigned)rows, 32, 0, stream>>>(x, y, rows, cols);",
        "  return cudaGetLastError();",
        "}",
    ]
    return "\n".join(lines) + "\n"
