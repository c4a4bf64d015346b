"""The device names of the kernels a compiled module registers (``worker/kernel_symbols.py``),
read from real shared libraries: one g++ builds with string constants shaped like the
registration strings nvcc emits, and (where nvcc is on PATH) a real CUDA module whose
``static``, templated and ``extern "C"`` kernels must be found under their *device* names.

What it does not check: that compute-sanitizer filters by these names (tests/gpu).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cuda_agent.evaluator.worker.kernel_symbols import (
    MAX_NAMES,
    defined_functions,
    device_kernel_names,
    rodata_sections,
)

MANGLED = "_ZN3foo12scale_kernelIfEEvPKT_PS1_i"

# the strings a module holds in its read-only data, as nvcc's registration code holds the
# device names of its kernels; "tail_kernel" is only there as the tail of a longer string
REGISTERED = f"""
extern "C" {{
extern const char* const names[];
const char* const names[] = {{
  "{MANGLED}", "plain_c_kernel", "not_a_function_name", "launcher_tail_kernel"
}};
void plain_c_kernel() {{}}
void tail_kernel() {{}}
}}
"""

CUDA_MODULE = """
namespace foo {
template <typename T>
__global__ void scale_kernel(const T* in, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * T(2);
}
}  // namespace foo
static __global__ void static_kernel(float* p) { p[threadIdx.x] = 0.f; }
extern "C" __global__ void c_kernel(float* p) { p[threadIdx.x] = 1.f; }

void launch(const float* a, float* b, int n, float* c) {
  foo::scale_kernel<float><<<1, 32>>>(a, b, n);
  static_kernel<<<1, 32>>>(c);
  c_kernel<<<1, 32>>>(c);
}
"""
DEVICE_NAMES = {"_Z13static_kernelPf", "_ZN3foo12scale_kernelIfEEvPKT_PS1_i", "c_kernel"}
HOST_STUBS = {"_ZL13static_kernelPf", "_ZN3fooL12scale_kernelIfEEvPKT_PS1_i"}

needs_gxx = pytest.mark.skipif(
    shutil.which("g++") is None or shutil.which("nm") is None, reason="needs g++ and nm"
)


def gxx_library(folder: Path, source: str, name: str = "lib") -> Path:
    """``source`` built with ``g++ -shared -fPIC`` into ``folder/name.so``."""
    cpp = folder / f"{name}.cpp"
    cpp.write_text(source)
    library = folder / f"{name}.so"
    subprocess.run(
        ["g++", "-shared", "-fPIC", "-w", str(cpp), "-o", str(library)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return library


@needs_gxx
def test_mangled_and_defined_names_are_kept_other_strings_dropped(tmp_path: Path) -> None:
    library = gxx_library(tmp_path, REGISTERED)
    names = device_kernel_names([library])
    # the mangled name, a plain name the module defines, and a defined name found as the tail
    # of a longer string; "not_a_function_name" and "launcher_tail_kernel" define nothing
    assert names == [MANGLED, "plain_c_kernel", "tail_kernel"]


@needs_gxx
def test_the_strings_are_in_the_rodata_sections(tmp_path: Path) -> None:
    library = gxx_library(tmp_path, REGISTERED)
    sections = rodata_sections(library.read_bytes())
    assert sections is not None
    data = b"".join(sections)
    for text in (MANGLED, "plain_c_kernel", "not_a_function_name", "launcher_tail_kernel"):
        assert text.encode() + b"\x00" in data


@needs_gxx
def test_defined_functions_are_functions_not_data(tmp_path: Path) -> None:
    library = gxx_library(tmp_path, REGISTERED)
    defined = defined_functions(library)
    assert defined is not None
    assert {"plain_c_kernel", "tail_kernel"} <= defined
    assert "names" not in defined  # a data symbol
    assert "not_a_function_name" not in defined


@needs_gxx
def test_names_of_several_modules_are_merged_and_sorted(tmp_path: Path) -> None:
    first = gxx_library(tmp_path, REGISTERED, "first")
    second = gxx_library(
        tmp_path,
        'extern "C" const char* const other[] = {"_Z6zkernelv", "ab_kernel"};\n'
        'extern "C" void ab_kernel() {}\n',
        "second",
    )
    names = device_kernel_names([first, second])
    assert names == sorted({MANGLED, "plain_c_kernel", "tail_kernel", "_Z6zkernelv", "ab_kernel"})
    assert device_kernel_names([]) == []


@needs_gxx
def test_too_many_names_mean_no_filter(tmp_path: Path) -> None:
    """More names than a kernel filter should hold: None (the caller checks every kernel)."""
    strings = ", ".join(f'"_Z{i}k"' for i in range(MAX_NAMES + 1))
    library = gxx_library(tmp_path, f'extern "C" const char* const many[] = {{{strings}}};\n')
    assert device_kernel_names([library]) is None


def test_a_file_that_is_no_elf_gives_none(tmp_path: Path) -> None:
    text = tmp_path / "module.so"
    text.write_text("not an ELF file, though it is named like one\n")
    assert device_kernel_names([text]) is None
    assert device_kernel_names([tmp_path / "missing.so"]) is None


@needs_gxx
def test_one_unreadable_module_among_good_ones_gives_none(tmp_path: Path) -> None:
    library = gxx_library(tmp_path, REGISTERED)
    text = tmp_path / "module.so"
    text.write_text("not an ELF file\n")
    assert device_kernel_names([library, text]) is None


def test_rodata_sections_of_data_that_is_no_64_bit_little_endian_elf_is_none() -> None:
    assert rodata_sections(b"") is None
    assert rodata_sections(b"#!/bin/sh\necho not an ELF file\n") is None
    assert rodata_sections(b"\x7fELF\x01\x01\x01" + bytes(64)) is None  # 32-bit
    assert rodata_sections(b"\x7fELF\x02\x02\x01" + bytes(64)) is None  # big-endian


@needs_gxx
def test_rodata_sections_of_a_truncated_library_is_none(tmp_path: Path) -> None:
    """The section headers sit at the end of the file: cut off, they cannot be read."""
    data = gxx_library(tmp_path, REGISTERED).read_bytes()
    assert rodata_sections(data[: len(data) // 2]) is None


@needs_gxx
def test_without_nm_no_names_are_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = gxx_library(tmp_path, REGISTERED)
    empty = tmp_path / "no-tools"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert defined_functions(library) is None
    assert device_kernel_names([library]) is None


def nvcc_library(folder: Path) -> Path:
    source = folder / "kernels.cu"
    source.write_text(CUDA_MODULE)
    library = folder / "kernels.so"
    subprocess.run(
        ["nvcc", "-shared", "-Xcompiler", "-fPIC", str(source), "-o", str(library)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return library


def ptx_entries(folder: Path) -> set[str]:
    """The kernels' device names as nvcc writes them in PTX (``.entry NAME(``)."""
    ptx = folder / "kernels.ptx"
    subprocess.run(
        ["nvcc", "-ptx", str(folder / "kernels.cu"), "-o", str(ptx)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return set(re.findall(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(", ptx.read_text()))


@pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("nm") is None,
    reason="nvcc is not on PATH (or nm is missing): a CUDA module cannot be built here",
)
def test_a_cuda_modules_kernels_are_found_under_their_device_names(tmp_path: Path) -> None:
    library = nvcc_library(tmp_path)
    names = device_kernel_names([library])
    assert names is not None
    assert set(names) >= DEVICE_NAMES
    # the host stubs of the static and the templated kernel have internal linkage (an "L"
    # in their names): those are nm's names, not the device's
    defined = defined_functions(library)
    assert defined is not None and defined >= HOST_STUBS
    assert not HOST_STUBS & set(names)
    # and what the device calls them, by nvcc's own PTX
    assert ptx_entries(tmp_path) == DEVICE_NAMES
