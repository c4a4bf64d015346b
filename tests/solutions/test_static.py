import textwrap

from cuda_agent.solutions.static import analyse

HEADER = "import torch\nfrom torch.utils.cpp_extension import load_inline\n"


def test_syntax_error_has_file_line_and_column() -> None:
    report = analyse("class ModelNew:\n    def f(self)\n        pass\n", "model_new.py")
    assert report.error == "model_new.py:2:16: syntax error: expected ':'"


def test_model_new_is_required() -> None:
    assert "defines no top-level `class ModelNew`" in (analyse("x = 1\n", "s.py").error or "")


def test_inline_call_with_constant_arguments_is_extracted() -> None:
    source = HEADER + (
        "import textwrap\n"
        "CPP = 'torch::Tensor f(torch::Tensor x);'\n"
        "CUDA = textwrap.dedent('''\n    __global__ void k() {}\n''') + '// tail'\n"
        "NAME = f'ext_{1}'\n"
        "mod = load_inline(NAME, CPP, cuda_sources=[CUDA], functions=['f'],\n"
        "                  extra_cuda_cflags=['-O3', '--use_fast_math'])\n"
        "class ModelNew: pass\n"
    )
    report = analyse(source, "s.py")
    assert report.error is None
    assert report.unresolved_inline_calls == 0
    (call,) = report.inline_calls
    assert call["name"] == "ext_1"
    assert call["cuda_sources"] == ["\n__global__ void k() {}\n// tail"]
    assert call["functions"] == ["f"]


def test_dynamic_inline_call_is_left_to_the_worker() -> None:
    source = HEADER + (
        "import os\nmod = load_inline('e', os.environ['SRC'])\nclass ModelNew: pass\n"
    )
    report = analyse(source, "s.py")
    assert report.inline_calls == []
    assert report.unresolved_inline_calls == 1


def test_findings_are_informational() -> None:
    source = (
        "import threading, ctypes\nimport torch\ns = torch.cuda.Stream()\nclass ModelNew: pass\n"
    )
    report = analyse(source, "s.py")
    assert report.error is None
    assert any("threads" in f for f in report.findings)
    assert any("ctypes" in f for f in report.findings)
    assert any("streams" in f for f in report.findings)


def test_load_inline_with_sources_local_to_a_function_is_found_as_a_local_call() -> None:
    """KernelBench-format solutions often keep their source string inside ``__init__``; such a
    call is resolved from the function's own constants, apart from module-level calls."""
    source = textwrap.dedent(
        """
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        FLAGS = ["-O2"]
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                cuda_code = "__global__ void k() {}\\n"
                cpp_code = "void f();"
                self.ext = load_inline(
                    name="local_ext", cpp_sources=cpp_code, cuda_sources=cuda_code,
                    functions=["f"], extra_cuda_cflags=FLAGS,
                )
            def other(self, flag):
                if flag:
                    code = "a"
                else:
                    code = "b"
                return load_inline(name="ambiguous", cpp_sources=code)
        """
    )
    report = analyse(source, "x.py")
    assert report.error is None and report.inline_calls == []
    assert report.local_inline_calls == [
        {
            "name": "local_ext",
            "cpp_sources": "void f();",
            "cuda_sources": "__global__ void k() {}\n",
            "functions": ["f"],
            "extra_cuda_cflags": ["-O2"],
        }
    ]
    assert report.unresolved_inline_calls == 1  # `code` is bound twice: not a constant


def test_a_call_whose_build_folder_is_computed_is_still_resolved() -> None:
    """``build_directory=os.path.join(...)`` (common in LLM-written solutions) changes nothing
    our builder makes: the call is resolved without it and built ahead of the worker."""
    source = textwrap.dedent(
        """
        import os
        import torch.nn as nn
        from torch.utils.cpp_extension import load_inline
        def get_ext():
            src = "void f();"
            folder = os.path.join(os.path.dirname(__file__), "build")
            return load_inline("ext", src, functions=["f"], build_directory=folder,
                               verbose=os.environ.get("V") == "1")
        class ModelNew(nn.Module):
            pass
        """
    )
    report = analyse(source, "x.py")
    assert report.unresolved_inline_calls == 0
    assert report.local_inline_calls == [
        {"name": "ext", "cpp_sources": "void f();", "functions": ["f"]}
    ]
