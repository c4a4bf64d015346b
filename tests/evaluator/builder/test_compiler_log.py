from cuda_agent.evaluator.builder.compiler_log import summarise

GCC_LOG = """In file included from /torch/include/ATen/ATen.h:1,
                 from cpp_sources:1:
cpp_sources: In function 'at::Tensor f(at::Tensor)':
cpp_sources:6:50: error: 'undefined_thing' was not declared in this scope
    6 |   b[i] = undefined_thing + a[i];
      |          ^~~~~~~~~~~~~~~
kernels/x.cpp:3:1: warning: unused variable
kernels/x.cpp:9:2: error: expected ';' before '}' token
"""


def test_keeps_errors_with_context_and_drops_include_chains() -> None:
    text = summarise(GCC_LOG)
    assert (
        text.splitlines()[0]
        == "cpp_sources:6:50: error: 'undefined_thing' was not declared in this scope"
    )
    assert "undefined_thing + a[i]" in text
    assert "kernels/x.cpp:9:2: error: expected ';'" in text
    assert "In file included" not in text
    assert "warning" not in text


def test_nvcc_style_and_linker_errors() -> None:
    nvcc = 'kernels/k.cu(12): error: identifier "blockIdxx" is undefined\n\n1 error detected\n'
    assert summarise(nvcc) == 'kernels/k.cu(12): error: identifier "blockIdxx" is undefined'
    link = (
        "/usr/bin/ld: a.o: in function `f':\nundefined reference to `launch'\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    assert "undefined reference to `launch'" in summarise(link)


def test_output_is_capped() -> None:
    log = "\n".join(f"f.cpp:{i}:1: error: {'x' * 900}" for i in range(1, 50))
    text = summarise(log)
    assert len(text) <= 4000
    assert "more errors" in text or "truncated" in text
