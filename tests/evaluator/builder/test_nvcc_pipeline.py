"""nvcc's steps with the front ends side by side: same object symbols, same diagnostics."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cuda_agent.evaluator.builder.nvcc_pipeline import compile_cu, module_id_text, parse_dryrun
from cuda_agent.evaluator.builder.toolchain import ToolchainError, discover

LISTING = """#$ _NVVM_BRANCH_=nvvm
#$ CICC_PATH=/cuda/bin/../nvvm/bin
#$ INCLUDES="-I/cuda/include"
#$ gcc -std=c++20 -E -x c++ -D__CUDACC__ "k.cu" -o "d/k.cpp4.ii"
#$ cudafe++ --c++20 --gen_c_file_name "d/k.cudafe1.cpp" --gen_module_id_file \
--module_id_file_name "d/k.module_id" "d/k.cpp4.ii"
#$ gcc -std=c++20 -D__CUDA_ARCH__=900 -E -x c++ "k.cu" -o "d/k.cpp1.ii"
#$ "$CICC_PATH/cicc" --c++20 --module_id_file_name "d/k.module_id" "d/k.cpp1.ii" -o "d/k.ptx"
#$ ptxas -arch=sm_90a "d/k.ptx" -o "d/k.cubin"
#$ fatbinary --create="d/k.fatbin" --embedded-fatbin="d/k.fatbin.c"
#$ gcc -std=c++20 -c -x c++ "d/k.cudafe1.cpp" -o "k.o"
""".replace("\\\n", "")


def test_a_dryrun_listing_splits_into_host_device_and_final_chains() -> None:
    plan = parse_dryrun(LISTING)
    assert plan is not None
    assert plan.env["CICC_PATH"] == "/cuda/bin/../nvvm/bin"
    assert "INCLUDES" not in plan.env
    assert [s.split()[0] for s in plan.host] == ["gcc", "cudafe++"]
    assert "--gen_module_id_file" not in plan.host[1]
    assert [s.split()[0] for s in plan.device] == ["gcc", '"$CICC_PATH/cicc"', "ptxas", "fatbinary"]
    assert plan.final == ['gcc -std=c++20 -c -x c++ "d/k.cudafe1.cpp" -o "k.o"']
    assert plan.module_id_file == "d/k.module_id"


def test_unknown_steps_mean_plain_nvcc() -> None:
    assert parse_dryrun(LISTING + '#$ nvlink -o "d/k_dlink.o"\n') is None
    assert parse_dryrun(LISTING.replace("--gen_module_id_file", "")) is None


def test_module_ids_have_nvccs_shape_and_differ_per_key() -> None:
    one = module_id_text("0123456789abcdef", "cuda.cu")
    assert one == "_01234567_7_cuda_cu_89abcdef"
    assert one != module_id_text("fedcba9876543210", "cuda.cu")


def nvcc_command() -> list[str]:
    try:
        return discover("cuda").nvcc_command((), "pipeline_test")
    except ToolchainError:
        pytest.skip("needs nvcc")


@pytest.mark.slow
def test_same_symbols_and_same_errors_as_plain_nvcc(tmp_path: Path) -> None:
    command = nvcc_command()
    (tmp_path / "ok.cu").write_text(  # internal-linkage kernels: their names use the module id
        "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
        "namespace { __global__ void hidden(float* x) { x[0] = 2.0f; } }\n"
        "template <typename T> __global__ void tk(T* x) { x[0] = T(3); }\n"
        "void launch(float* x) {\n"
        "  k<<<1, 32>>>(x); hidden<<<1, 1>>>(x);\n"
        "  auto run = [&](auto* p) { tk<<<1, 1>>>(p); }; run(x);\n"
        "}\n"
    )
    (tmp_path / "bad.cu").write_text(
        '#line 1 "cuda_sources"\n__global__ void k(float* x) { x[0] = undefined_name; }\n'
    )
    deadline = time.monotonic() + 600
    ok, log = compile_cu(command, "ok.cu", "ok.o", tmp_path, deadline, "0123456789abcdef")
    assert ok, log
    plain = subprocess.run(
        [*command, "-c", "ok.cu", "-o", "plain.o"], cwd=tmp_path, capture_output=True, check=True
    )
    assert plain.returncode == 0
    nm = shutil.which("nm")
    if nm:
        symbols = [
            subprocess.run(
                [nm, "-g", "--defined-only", obj], cwd=tmp_path, capture_output=True, text=True
            ).stdout
            for obj in ("ok.o", "plain.o")
        ]
        # names of internal-linkage entities embed the module id (ours differs by design)
        ours, theirs = ([ln.split()[-1] for ln in text.splitlines()] for text in symbols)
        assert [n for n in ours if "_GLOBAL__N_" not in n] == [
            n for n in theirs if "_GLOBAL__N_" not in n
        ]
        assert sum("_GLOBAL__N_" in n for n in ours) == sum("_GLOBAL__N_" in n for n in theirs)
    ok, log = compile_cu(command, "bad.cu", "bad.o", tmp_path, deadline, "fedcba9876543210")
    plain_bad = subprocess.run(
        [*command, "-c", "bad.cu", "-o", "bad2.o"], cwd=tmp_path, capture_output=True, text=True
    )
    assert not ok and plain_bad.returncode != 0
    assert log == plain_bad.stdout + plain_bad.stderr
    assert 'cuda_sources(1): error: identifier "undefined_name" is undefined' in log
