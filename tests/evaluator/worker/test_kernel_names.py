"""Which kernels of a GPU kernel record are the candidate's: the symbols of its compiled
modules (nm) and the Triton kernels the harness's launch hook ran (no GPU needed here: the
record is built from activities as the profiler reports them)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from cuda_agent.evaluator.worker.kernels import (
    DeviceActivity,
    candidate_kernel_names,
    summarise_kernels,
)
from cuda_agent.evaluator.worker.triton_launches import compiled_kernel_name, kernel_names

TORCH_KERNEL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1>)"
)


def activities(*kernels: tuple[str, float]) -> list[DeviceActivity]:
    out, start = [], 0.0
    for name, duration in kernels:
        out.append(DeviceActivity(name, 7, start, duration, is_kernel=True))
        start += duration
    return out


def test_a_triton_kernel_the_hook_launched_counts_as_the_candidates() -> None:
    names = candidate_kernel_names([], launched={"relu_kernel"})
    assert names == {"relu_kernel"}
    summary = summarise_kernels(activities((TORCH_KERNEL, 1.0), ("relu_kernel", 9.0)), names)
    assert summary.custom_kernels == 1 and summary.kernels == 2
    assert summary.coverage == pytest.approx(0.9)
    marks = {row["name"]: row["custom"] for row in summary.table}
    assert marks == {"relu_kernel": True, TORCH_KERNEL[:160]: False}


def test_without_launched_names_a_triton_kernel_is_not_the_candidates() -> None:
    """What the record did before (0 launches: `custom_kernels_idle` under kernelbench)."""
    record = activities(("relu_kernel", 9.0))
    summary = summarise_kernels(record, candidate_kernel_names([]))
    assert summary.custom_kernels == 0 and summary.coverage == 0.0


@pytest.mark.skipif(
    shutil.which("nm") is None or shutil.which("cc") is None, reason="needs nm and cc"
)
def test_module_symbols_and_triton_names_are_counted_together(tmp_path: Path) -> None:
    source = tmp_path / "ext.c"
    source.write_text("void cuda_side_kernel(float *y) { y[0] = 1.0f; }\n")
    module = tmp_path / "ext.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o", str(module)], check=True)
    names = candidate_kernel_names([module], launched=["triton_side"])
    assert names is not None and {"cuda_side_kernel", "triton_side"} <= names
    summary = summarise_kernels(
        activities(("cuda_side_kernel", 2.0), ("triton_side", 2.0), (TORCH_KERNEL, 4.0)), names
    )
    assert summary.custom_kernels == 2 and summary.coverage == pytest.approx(0.5)


def test_the_name_of_what_tritons_launch_returned() -> None:
    """Triton 3.x's ``JITFunction.run`` returns the ``CompiledKernel``: its ``name`` (from
    ``metadata.name``, the PTX entry CUPTI reports); stand-ins with only one of the two, and
    what the interpreter returns (nothing)."""
    assert compiled_kernel_name(SimpleNamespace(name="k_0", metadata=None)) == "k_0"
    assert compiled_kernel_name(SimpleNamespace(metadata=SimpleNamespace(name="k_1"))) == "k_1"
    assert compiled_kernel_name(None) is None
    assert compiled_kernel_name(SimpleNamespace(name=3)) is None
    assert kernel_names(None) == set()
