"""The compilers, include paths and flags used to build extensions against the installed torch.

Discovered once per installation (``toolchain_record`` remembers it on disk, so that a
process that never imports torch finds it in milliseconds). The toolchain's identity
(compiler versions, torch version and ABI, CUDA version, target architectures) is part of
every build cache key, so a cached object is never reused across incompatible toolchains.
Needs no GPU: the CUDA architecture comes from ``TORCH_CUDA_ARCH_LIST``, else the visible GPU,
else Hopper (9.0).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.builder import toolchain_record

CXX_STD = "-std=c++20"
EXTENSION_DEFINE = "-DTORCH_API_INCLUDE_EXTENSION_H"  # load_inline defines it for every unit
DEFAULT_CUDA_ARCH = "9.0"
# torch's own defaults for CUDA sources; kept so code written for load_inline behaves the same.
TORCH_CUDA_DEFINES = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
)


class ToolchainError(RuntimeError):
    """A compiler or library needed for the requested backend is missing."""


@dataclass(frozen=True)
class Toolchain:
    backend: str
    cxx: str
    cxx_version: str
    torch_version: str
    torch_lib_dir: str
    system_includes: tuple[str, ...]
    defines: tuple[str, ...]
    nvcc: str | None = None
    nvcc_version: str | None = None
    cuda_home: str | None = None
    cuda_archs: tuple[str, ...] = ()

    @property
    def host_cpu(self) -> str:
        """What ``-march=native`` compiles for; part of the key of such objects only."""
        return _host_cpu_signature()

    @property
    def identity(self) -> str:
        parts = [
            self.backend,
            self.cxx_version,
            self.torch_version,
            sys.version.split()[0],
            *self.defines,
            self.nvcc_version or "",
            *self.cuda_archs,
        ]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    def cxx_command(self, extra: tuple[str, ...]) -> list[str]:
        """g++ flags for a translation unit. The module name is not a ``-D`` flag: it comes
        from a generated header (``-include``), so one precompiled header serves every module.

        On the cuda backend, C++ files are host glue (argument checks, allocation, a launch)
        whose speed does not show in the timing, while their pybind11 and ATen templates make
        ``-O3`` cost about a third more compile time than ``-O1``: they get ``-O1``. On the cpu
        backend the kernels themselves are C++ and get ``-O3``.
        """
        includes = [arg for inc in self.system_includes for arg in ("-isystem", inc)]
        level = "-O3" if self.backend == "cpu" else "-O1"
        base = [self.cxx, level, CXX_STD, "-fPIC", *self.defines, EXTENSION_DEFINE]
        base += [*includes, "-I."]
        return [*base, *(flag for flag in extra if flag not in base)]

    def nvcc_command(self, extra: tuple[str, ...], module: str) -> list[str]:
        """nvcc flags for a ``.cu`` unit. nvcc's ``-O`` sets the host compiler's level only
        (cicc and ptxas optimise device code regardless): host glue gets ``-O1`` unless the
        candidate asks for a level itself."""
        if not self.nvcc:
            raise ToolchainError("nvcc not found: set CUDA_HOME or put nvcc on PATH")
        includes = [arg for inc in self.system_includes for arg in ("-isystem", inc)]
        level = [] if any(re.fullmatch(r"-O\d?", flag) for flag in extra) else ["-O1"]
        return [
            self.nvcc,
            *level,
            CXX_STD,
            "--compiler-options",
            "-fPIC",
            f"-DTORCH_EXTENSION_NAME={module}",
            *self.defines,
            EXTENSION_DEFINE,
            *TORCH_CUDA_DEFINES,
            "--expt-relaxed-constexpr",
            *gencode_flags(self.cuda_archs),
            *includes,
            "-I.",
            *extra,
        ]

    def link_command(self, objects: list[str], output: str, extra: tuple[str, ...]) -> list[str]:
        libs = ["-L" + self.torch_lib_dir, "-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"]
        if self.backend == "cuda":
            assert self.cuda_home is not None
            libs += [f"-L{self.cuda_home}/lib64", "-lcudart"]
            if (Path(self.torch_lib_dir) / "libtorch_cuda.so").exists():
                libs += ["-lc10_cuda", "-ltorch_cuda"]
        return [self.cxx, "-shared", *objects, *libs, *extra, "-o", output]


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """``9.0`` -> sm_90a machine code (Hopper features) plus compute_90 PTX for forward use."""
    flags = []
    for arch in archs:
        num = arch.replace(".", "").replace("+PTX", "")
        real = f"{num}a" if num == "90" else num
        flags.append(f"-gencode=arch=compute_{real},code=sm_{real}")
        if arch.endswith("+PTX"):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


@functools.lru_cache(maxsize=4)
def discover(backend: str) -> Toolchain:
    """Find compilers and torch's build settings for ``backend`` (``cpu`` or ``cuda``): from
    the record an earlier process left (``toolchain_record``: no torch import, no compiler
    run), else by looking, which is then recorded."""
    recorded = toolchain_record.lookup(backend)
    if recorded is not None:
        toolchain = _from_record(recorded)
        if toolchain is not None:
            return toolchain
    toolchain = _look_for(backend)
    toolchain_record.remember(toolchain)
    return toolchain


def _from_record(fields: dict[str, Any]) -> Toolchain | None:
    """The recorded toolchain, if its fields still fit and its compilers are still there."""
    try:
        for name in ("system_includes", "defines", "cuda_archs"):
            fields[name] = tuple(fields.get(name) or ())
        toolchain = Toolchain(**fields)
    except TypeError:
        return None
    tools = [toolchain.cxx, *([toolchain.nvcc] if toolchain.nvcc else [])]
    if not all(shutil.which(tool) or Path(tool).exists() for tool in tools):
        return None
    return toolchain


def _look_for(backend: str) -> Toolchain:
    import torch
    import torch.utils.cpp_extension as cpp_extension

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise ToolchainError("no C++ compiler found (install g++ or set CXX)")
    includes = (*cpp_extension.include_paths(), sysconfig.get_paths()["include"])
    defines = [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    for attr, macro in (
        ("_PYBIND11_COMPILER_TYPE", "PYBIND11_COMPILER_TYPE"),
        ("_PYBIND11_STDLIB", "PYBIND11_STDLIB"),
        ("_PYBIND11_BUILD_ABI", "PYBIND11_BUILD_ABI"),
    ):
        value = getattr(torch._C, attr, None)
        if value:
            defines.append(f'-D{macro}="{value}"')
    common = dict(
        cxx=cxx,
        cxx_version=_first_line([cxx, "--version"]),
        torch_version=torch.__version__,
        torch_lib_dir=str(Path(torch.__file__).parent / "lib"),
        defines=tuple(defines),
    )
    if backend == "cpu":
        return Toolchain(backend="cpu", system_includes=tuple(includes), **common)  # type: ignore[arg-type]
    if backend != "cuda":
        raise ToolchainError(f"unknown backend {backend!r}")
    cuda_home = _cuda_home()
    nvcc = str(Path(cuda_home) / "bin" / "nvcc")
    cuda_includes = [str(Path(cuda_home) / "include")]
    if not (Path(includes[0]) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        cuda_includes.append(str(Path(__file__).parent / "include"))  # CPU-only torch wheel
    return Toolchain(
        backend="cuda",
        system_includes=(*includes, *cuda_includes),
        nvcc=nvcc,
        nvcc_version=_last_line([nvcc, "--version"]),
        cuda_home=cuda_home,
        cuda_archs=cuda_archs(),
        **common,  # type: ignore[arg-type]
    )


@functools.lru_cache(maxsize=1)
def _host_cpu_signature() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown-cpu"
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "flags") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    return hashlib.sha256(repr(sorted(fields.items())).encode()).hexdigest()[:16]


def cuda_archs() -> tuple[str, ...]:
    env = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if env:
        return tuple(a for a in env.replace(";", " ").split() if a)
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return (f"{major}.{minor}",)
    except Exception:  # no usable GPU: fall back to the default target
        pass
    return (DEFAULT_CUDA_ARCH,)


def _cuda_home() -> str:
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "include" / "cuda_runtime.h").exists():
            return candidate
    raise ToolchainError("CUDA toolkit not found: install it, set CUDA_HOME or put nvcc on PATH")


def _first_line(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[0] if out.strip() else cmd[0]


def _last_line(cmd: list[str]) -> str:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    return out.strip().splitlines()[-1] if out.strip() else cmd[0]
