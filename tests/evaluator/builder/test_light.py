"""The light layout builds exactly when the stock ``load_inline`` layout builds.

Each case is a KernelBench-style ``load_inline`` call of our own. It is compiled twice, in the
light layout alone (``layout="light"``: no fallback) and in the stock layout alone (the text
and headers ``torch.utils.cpp_extension.load_inline`` would use), and the two must agree: both
build, or both fail with the same first error line. The cpu backend (g++) cases always run;
the CUDA cases need nvcc. Results land in the shared test build cache, so reruns are cheap.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cuda_agent.evaluator.builder.builder import OWN_FAILURE_LAYOUT, BuildResult, build_extension
from cuda_agent.evaluator.builder.inline import inline_spec
from cuda_agent.evaluator.builder.light_failure import without_hints

pytestmark = pytest.mark.slow

# the cpu cases build main.cpp's stock layout, whose precompiled torch/extension.h (0.75 GB,
# about a minute on two cores) the first of them makes: one worker, in turn, while the other
# runs other tests (side by side, the second waited on the first's lock)
CPU_STOCK_HEADERS = pytest.mark.xdist_group("cpu_stock_headers")
HAS_NVCC = shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").exists()
ERROR_LINE = re.compile(r"^(\S+?)(?::(\d+)(?::\d+)?:|\((\d+)\):) (?:fatal )?error\b(.*)$")

HOST_CODE = """
#include <torch/extension.h>

torch::Tensor fused(torch::Tensor x, torch::Tensor y) {
    TORCH_CHECK(x.sizes() == y.sizes(), "shape mismatch");
    auto out = torch::empty_like(x);
    auto z = at::relu(x) + y * 2;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "fused", [&] {
        out.copy_(z.to(x.scalar_type()));
    });
    return out;
}
"""

DUPLICATE_MODULE = """
#include <torch/extension.h>
torch::Tensor twice(torch::Tensor x) { return x * 2; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("twice", &twice); }
"""

SYNTAX_ERROR = """
#include <torch/extension.h>
torch::Tensor broken(torch::Tensor x) {
    auto y = x * 2
    return y;
}
"""

MISSING_NAME = """
#include <torch/extension.h>
torch::Tensor missing(torch::Tensor x) {
    return torch::not_an_operator(x);
}
"""

AMBIGUOUS = """
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }
torch::Tensor use(torch::Tensor x) { return relu(x); }
"""


def first_error(result: BuildResult) -> str:
    """The first ``file:line: error`` of a failed build, file reduced to its base name."""
    for line in (result.error or "").splitlines():
        match = ERROR_LINE.match(line.strip())
        if match:
            return f"{Path(match[1]).name}:{match[2] or match[3]}: error{match[4]}"
    return (result.error or "").splitlines()[-1] if result.error else ""


def both_layouts(backend: str, **call: object) -> tuple[BuildResult, BuildResult]:
    spec = inline_spec(backend, **call)
    light = build_extension(spec, layout="light", timeout_s=1800)
    stock = build_extension(spec, layout="stock", timeout_s=1800)
    assert set(light.layouts.values()) <= {"light"}, light.layouts
    return light, stock


def assert_same(light: BuildResult, stock: BuildResult) -> None:
    assert light.ok == stock.ok, (light.error, stock.error)
    if not stock.ok:
        assert first_error(light) == first_error(stock)
        assert first_error(stock)


@CPU_STOCK_HEADERS
def test_cpu_host_code_with_operators_builds_in_both_layouts() -> None:
    light, stock = both_layouts("cpu", name="kb_fused", cpp_sources=HOST_CODE, functions=["fused"])
    assert light.ok and stock.ok, (light.error, stock.error)
    assert light.layouts == {"main.cpp": "light"}


@CPU_STOCK_HEADERS
@pytest.mark.parametrize(
    ("source", "functions", "expected"),
    [
        (DUPLICATE_MODULE, ["twice"], "redefinition"),
        (SYNTAX_ERROR, ["broken"], "cpp_sources:5: error: expected"),
        (MISSING_NAME, ["missing"], "not_an_operator"),
        (AMBIGUOUS, ["use"], "ambiguous"),
    ],
    ids=["pybind-module-twice", "syntax-error", "missing-name", "ambiguous-with-aten"],
)
def test_cpu_failures_match_stock(source: str, functions: list[str], expected: str) -> None:
    light, stock = both_layouts("cpu", name="kb_fail", cpp_sources=source, functions=functions)
    assert not stock.ok
    assert expected in first_error(stock)
    assert_same(light, stock)


@CPU_STOCK_HEADERS
def test_auto_falls_back_to_stock_when_light_lacks_a_header() -> None:
    # token pasting hides ``sigmoid`` from the name scan: the light text cannot compile
    source = """
    #include <torch/extension.h>
    #define JOIN(a, b) a##b
    torch::Tensor hidden(torch::Tensor x) { return at::JOIN(sig, moid)(x); }
    """
    spec = inline_spec("cpu", "kb_hidden", source, functions=["hidden"])
    light = build_extension(spec, layout="light", timeout_s=1800)
    assert not light.ok
    result = build_extension(spec, timeout_s=1800)
    assert result.ok, result.error
    assert result.layouts == {"main.cpp": "stock (light failed)"}


UNDECLARED_BINDING = """
#include <torch/extension.h>
torch::Tensor launch(torch::Tensor x, int n);  // forgot: the bound name is launch_kernel
"""


@CPU_STOCK_HEADERS  # its comparison builds the stock layout too
@pytest.mark.parametrize(
    ("name", "source", "functions"),
    [
        ("kb_own_twice", DUPLICATE_MODULE, ["twice"]),
        ("kb_own_undeclared", UNDECLARED_BINDING, ["launch_kernel"]),
    ],
    ids=["pybind-module-twice", "bound-function-undeclared"],
)
def test_auto_reports_the_sources_own_errors_without_a_stock_compile(
    name: str, source: str, functions: list[str]
) -> None:
    spec = inline_spec("cpu", name=name, cpp_sources=source, functions=functions)
    result = build_extension(spec, timeout_s=1800)
    assert not result.ok
    assert result.layouts == {"main.cpp": OWN_FAILURE_LAYOUT}
    again = build_extension(spec, timeout_s=1800)  # the verdict is cached
    assert again.error == result.error and again.layouts == result.layouts
    stock = build_extension(spec, layout="stock", timeout_s=1800)
    assert not stock.ok
    assert first_error(result) == without_hints(first_error(stock))


@CPU_STOCK_HEADERS
def test_auto_retries_with_stock_when_a_header_mentions_the_missing_name() -> None:
    # unqualified this time: "'sigmoid' was not declared", a name torch's headers declare
    source = """
    #include <torch/extension.h>
    #define JOIN(a, b) a##b
    using namespace at;
    torch::Tensor hidden(torch::Tensor x) { return JOIN(sig, moid)(x); }
    """
    spec = inline_spec("cpu", "kb_hidden_unqualified", source, functions=["hidden"])
    light = build_extension(spec, layout="light", timeout_s=1800)
    assert not light.ok and "sigmoid" in (light.error or "")
    assert "was not declared in this scope" in (light.error or "")
    result = build_extension(spec, timeout_s=1800)
    assert result.ok, result.error
    assert result.layouts == {"main.cpp": "stock (light failed)"}


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
@pytest.mark.xdist_group("nvcc_headers")  # both build the cuda flags' two PCHs: one worker
def test_cuda_extension_h_in_both_units_and_a_second_module_fail_alike() -> None:
    cuda = """
    #include <torch/extension.h>
    #include <cuda_runtime.h>
    __global__ void scale_kernel(const float* x, float* y, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2.0f * x[i];
    }
    torch::Tensor scale(torch::Tensor x) {
        auto y = torch::empty_like(x);
        int n = x.numel();
        scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
        return y;
    }
    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &scale); }
    """
    cpp = "#include <torch/extension.h>\ntorch::Tensor scale(torch::Tensor x);\n"
    spec = inline_spec(
        "cuda", name="kb_twice", cpp_sources=cpp, cuda_sources=cuda, functions=["scale"]
    )
    light = build_extension(spec, layout="light", timeout_s=1800)
    stock = build_extension(spec, layout="stock", timeout_s=1800)
    assert not stock.ok and (stock.error or "").startswith("link failed")
    assert "multiple definition of `PyInit_kb_twice'" in (stock.error or "")
    assert_same(light, stock)
    # a .cu defining the module keeps stock's headers (pybind11's machinery under nvcc)
    assert light.layouts == {"main.cpp": "light", "cuda.cu": "stock"}


@pytest.mark.skipif(not HAS_NVCC, reason="needs nvcc")
@pytest.mark.xdist_group("nvcc_headers")
def test_cuda_missing_identifier_fails_alike() -> None:
    cuda = """
    #include <torch/extension.h>
    torch::Tensor scale(torch::Tensor x) {
        auto y = torch::empty_like(x);
        launch_missing_kernel(x.data_ptr<float>(), y.data_ptr<float>());
        return y;
    }
    """
    cpp = "#include <torch/extension.h>\ntorch::Tensor scale(torch::Tensor x);\n"
    call = dict(name="kb_missing", cpp_sources=cpp, cuda_sources=cuda, functions=["scale"])
    light, stock = both_layouts("cuda", **call)
    assert not stock.ok
    assert "launch_missing_kernel" in first_error(stock)
    assert "cuda_sources:5" in first_error(stock)
    assert_same(light, stock)
    auto = build_extension(inline_spec("cuda", **call), timeout_s=1800)
    assert auto.layouts["cuda.cu"] == OWN_FAILURE_LAYOUT
    assert first_error(auto) == first_error(stock)
