import pytest

from cuda_agent.evaluator.builder.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.builder.spec import FlagError, vet_cuda_flags, vet_cxx_flags, vet_ld_flags


def test_allowed_flags_pass_and_empty_ones_vanish() -> None:
    assert vet_cxx_flags(["-O3", "", "-DFOO=1 -ffast-math"]) == ("-O3", "-DFOO=1", "-ffast-math")
    assert vet_cuda_flags(["-O3", "--use_fast_math", "-Xptxas", "-v"]) == (
        "-O3",
        "--use_fast_math",
        "-Xptxas=-v",
    )
    assert vet_ld_flags(["-lcublas", "-L/usr/local/cuda/lib64"]) == ("-lcublas",)


def test_architecture_flags_are_dropped() -> None:
    assert vet_cuda_flags(["-arch=sm_80", "-gencode", "arch=compute_80,code=sm_80"]) == ()


@pytest.mark.parametrize(
    "flags", [["-fplugin=evil.so"], ["-B/tmp"], ["-I/etc"], ["-wrapper", "sh"], ["-DX=$(id)"]]
)
def test_dangerous_compiler_flags_are_refused(flags: list[str]) -> None:
    with pytest.raises(FlagError):
        vet_cxx_flags(flags)


def test_dangerous_linker_flags_are_refused() -> None:
    with pytest.raises(FlagError, match="linker flag"):
        vet_ld_flags(["-Wl,--wrap=malloc"])


def test_inline_spec_writes_stock_load_inline_texts_with_line_markers() -> None:
    spec = inline_spec(
        "cuda",
        "ext",
        ["#include <torch/extension.h>", "int f();"],
        cuda_sources="__global__ void k() {}",
        functions={"f": "doc"},
    )
    main, cuda = spec.files
    assert main.prelude == "#include <torch/extension.h>\n"
    assert main.body.startswith('#line 1 "cpp_sources"\n#include <torch/extension.h>\nint f();\n')
    assert 'm.def("f", torch::wrap_pybind_function(f), "doc");' in main.body
    assert (
        cuda.prelude == "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
    )
    assert cuda.body == '#line 1 "cuda_sources"\n__global__ void k() {}\n'


def test_inline_spec_options_that_change_the_text() -> None:
    plain = inline_spec("cpu", "ext", "int f();", functions="f", with_pytorch_error_handling=False)
    assert 'm.def("f", f, "f");' in plain.files[0].text
    bare = inline_spec("cpu", "ext", "int f();", no_implicit_headers=True)
    assert bare.files[0].prelude == "" and bare.files[0].body_offset == 0
    with pytest.raises(FlagError, match="functions"):
        inline_spec("cpu", "ext", "int f();", functions=3)


def test_workdir_spec_takes_binding_files_from_the_harness() -> None:
    spec = workdir_spec(
        "cuda",
        {"kernels/a.cu": "k", "kernels/a_binding.cpp": "b", "kernels/notes.md": "x"},
        {"binding.cpp": "harness", "binding_registry.h": "harness"},
    )
    names = [f.name for f in spec.files]
    assert names == ["binding.cpp", "binding_registry.h", "kernels/a.cu", "kernels/a_binding.cpp"]
    assert spec.name == "cuda_extension"
    assert "--use_fast_math" in spec.cuda_cflags
