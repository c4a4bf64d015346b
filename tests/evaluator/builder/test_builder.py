"""Real builds with g++ (cpu backend): cold build, cache hit, per-file reuse, error messages."""

import secrets

import pytest

from cuda_agent.evaluator.builder.builder import build_extension
from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.workspace.template_files import harness_binding_files
from tests.helpers import load_module

PLAIN = """
#include <Python.h>
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(%d); }
static PyMethodDef methods[] = {
    {"answer", answer, METH_NOARGS, "42"}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef def = {PyModuleDef_HEAD_INIT, "%s", nullptr, -1, methods};
PyMODINIT_FUNC PyInit_%s() { return PyModule_Create(&def); }
"""


def plain_spec(value: int):
    name = f"plain_{secrets.token_hex(4)}"
    # no torch headers: compiles in well under a second, so the cache test stays fast
    return inline_spec("cpu", name, PLAIN % (value, name, name), no_implicit_headers=True)


@pytest.mark.slow
def test_cold_build_then_cache_hit() -> None:
    spec = plain_spec(42)
    first = build_extension(spec)
    assert first.ok, first.error
    assert (first.cached, first.objects_built) == (False, 1)
    assert load_module(spec.name, first.module_path).answer() == 42
    second = build_extension(spec)
    assert second.ok and second.cached
    assert second.objects_built == 0
    assert second.module_path == first.module_path


@pytest.mark.slow
def test_compile_error_points_at_the_candidates_line() -> None:
    spec = inline_spec(
        "cpu", "broken_ext", "int f() {\n  return missing_value;\n}\n", no_implicit_headers=True
    )
    result = build_extension(spec)
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("compilation failed in main.cpp:")
    assert "cpp_sources:2:" in result.error
    assert "missing_value" in result.error


def test_cuda_sources_are_refused_on_the_cpu_backend() -> None:
    spec = inline_spec("cpu", "gpu_ext", "int f();", cuda_sources="__global__ void k() {}")
    result = build_extension(spec)
    assert not result.ok
    assert "cannot be built for the cpu backend" in (result.error or "")


@pytest.mark.slow
def test_workdir_edit_recompiles_only_the_changed_file() -> None:
    tag = secrets.token_hex(4)
    kernel = 'extern "C" float scale_%s(float x) { return x * %s; }\n'
    binding = (
        "#include <torch/types.h>\n#include <torch/csrc/utils/pybind.h>\n"
        '#include "binding_registry.h"\n'
        f'extern "C" float scale_{tag}(float x);\n'
        f'static void bind(pybind11::module_& m) {{ m.def("scale", &scale_{tag}); }}\n'
        "REGISTER_BINDING(scale, bind);\n"
    )
    harness = harness_binding_files()
    first = build_extension(
        workdir_spec(
            "cpu",
            {"kernels/scale.cpp": kernel % (tag, "2.0f"), "kernels/scale_binding.cpp": binding},
            harness,
        )
    )
    assert first.ok, first.error
    edited = build_extension(
        workdir_spec(
            "cpu",
            {"kernels/scale.cpp": kernel % (tag, "3.0f"), "kernels/scale_binding.cpp": binding},
            harness,
        )
    )
    assert edited.ok, edited.error
    assert (edited.objects_built, edited.objects_cached) == (1, 2)
    import torch  # noqa: F401 - the module links against torch's libraries

    assert load_module("cuda_extension", edited.module_path).scale(1.5) == 4.5
