"""A solution's kernel language, read from its code."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.core.hashing import files_hash
from cuda_agent.core.types import Solution, SolutionKind
from cuda_agent.solutions.language import detect_language, written_in

TRITON = "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n    pass\n"
INLINE = "from torch.utils.cpp_extension import load_inline\nops = load_inline('a', 'int f();')\n"


def single(text: str) -> Solution:
    files = {"solution.py": text}
    return Solution(SolutionKind.SINGLE_FILE, Path("solution.py"), files, files_hash(files.items()))


def workdir(files: dict[str, str]) -> Solution:
    return Solution(SolutionKind.WORKDIR, Path("w"), files, files_hash(files.items()))


@pytest.mark.parametrize(
    ("text", "language"),
    [
        (TRITON, "triton"),
        (
            "import triton as tr\n\n@tr.autotune(configs=[], key=[])\n@tr.jit\ndef k(x): pass\n",
            "triton",
        ),
        ("from triton import jit as J\n\n@J\ndef k(x): pass\n", "triton"),
        (INLINE, "cuda"),
        ("import torch.utils.cpp_extension as ce\nm = ce.load('m', ['a.cpp'])\n", "cuda"),
        (INLINE + TRITON, "cuda+triton"),
        ("import json\nimport triton\nx = json.load(open('f'))\n", "pytorch"),  # no kernel
        ("import torch\nclass ModelNew: pass\n", "pytorch"),
        ("this does not parse (", "pytorch"),
    ],
)
def test_single_files(text: str, language: str) -> None:
    assert detect_language(single(text)) == language


def test_workdirs() -> None:
    cuda = {"model_new.py": "import cuda_extension\n", "kernels/k.cu": "__global__ void k() {}"}
    assert detect_language(workdir(cuda)) == "cuda"
    triton = {"model_new.py": "from kernels.k import k\n", "kernels/k.py": TRITON}
    assert detect_language(workdir(triton)) == "triton"


def test_what_a_requirement_accepts() -> None:
    assert written_in("triton", "triton") and written_in("cuda+triton", "cuda")
    assert not written_in("pytorch", "cuda") and not written_in("cuda", "triton")
