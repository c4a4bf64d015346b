import pytest

from cuda_agent.evaluator.build.inline import inline_spec, workdir_spec
from cuda_agent.evaluator.build.spec import FlagError, vet_cuda_flags, vet_cxx_flags, vet_ld_flags


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


def test_inline_spec_uses_light_headers_and_line_markers() -> None:
    spec = inline_spec("cpu", "ext", "#include <torch/extension.h>\nint f();", functions=["f"])
    main = spec.files[0].text
    assert "#include <torch/types.h>" in main
    assert main.count("torch/extension.h") == 0
    assert '#line 1 "cpp_sources"' in main
    assert 'm.def("f", &f, "f");' in main


def test_inline_spec_keeps_full_header_for_the_cpp_frontend() -> None:
    spec = inline_spec("cpu", "ext", "#include <torch/extension.h>\ntorch::nn::Linear l{nullptr};")
    assert "#include <torch/extension.h>" in spec.files[0].text


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
