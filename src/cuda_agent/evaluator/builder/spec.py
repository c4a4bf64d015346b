"""What to build: an ``ExtensionSpec`` (module name, backend, sources, vetted extra flags).

A spec is pure data. It is made from a ``load_inline`` call (``inline.py``) or from a workdir
(``workdir.py``) and turned into a shared library by ``builder.py``. Candidate-supplied compiler
flags pass through an allowlist here: a flag that could load plugins, change search paths or
otherwise reach outside the build is refused with a one-line reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from cuda_agent.core.hashing import files_hash

SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".cu")
HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh", ".inl")
MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class FlagError(ValueError):
    """A candidate asked for a compiler or linker flag we do not allow."""


@dataclass(frozen=True)
class SourceFile:
    """A file placed in the build directory under ``name`` (a relative POSIX path).

    ``body_offset`` marks a ``load_inline`` unit: ``text[:body_offset]`` is the prelude stock
    ``load_inline`` writes (its implicit includes), ``text[body_offset:]`` the candidate's code.
    Such a unit may be compiled in the light layout first (``light.py``); ``text`` itself is
    always exactly the stock layout (plus ``#line`` markers).
    """

    name: str
    text: str
    body_offset: int | None = None

    @property
    def prelude(self) -> str:
        return self.text[: self.body_offset or 0]

    @property
    def body(self) -> str:
        return self.text[self.body_offset or 0 :]

    @property
    def is_cuda(self) -> bool:
        return self.name.endswith(".cu")

    @property
    def is_translation_unit(self) -> bool:
        return self.name.endswith(SOURCE_SUFFIXES)


@dataclass(frozen=True)
class ExtensionSpec:
    """One Python extension module to build from in-memory sources."""

    name: str
    backend: str
    files: tuple[SourceFile, ...]
    cflags: tuple[str, ...] = ()
    cuda_cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    origin: str = "inline"

    def __post_init__(self) -> None:
        if not MODULE_NAME.match(self.name):
            raise FlagError(f"extension name {self.name!r} is not a valid Python identifier")

    @property
    def translation_units(self) -> tuple[SourceFile, ...]:
        return tuple(f for f in self.files if f.is_translation_unit)

    @property
    def headers(self) -> tuple[SourceFile, ...]:
        return tuple(f for f in self.files if not f.is_translation_unit)

    def content_hash(self) -> str:
        return files_hash((f.name, f.text) for f in self.files)


# -O1 after the toolchain's level (g++ takes the last -O): the level AddressSanitizer's own docs
# suggest, and the instrumented build of a small load_inline unit takes about half the time of
# -O3's on the 2-core machine (10 s against 18 s, light layout, its precompiled header warm)
ADDRESS_SANITIZER_CFLAGS = ("-O1", "-fsanitize=address", "-fno-omit-frame-pointer")


def with_address_sanitizer(spec: ExtensionSpec) -> ExtensionSpec:
    """The same extension instrumented by AddressSanitizer (the cpu backend's memory check).
    These are the harness's flags, not the candidate's, so they skip the allowlist; the
    other flags make it a build (and a cache entry) of its own."""
    return replace(
        spec,
        cflags=(*spec.cflags, *ADDRESS_SANITIZER_CFLAGS),
        ldflags=(*spec.ldflags, "-fsanitize=address"),
    )


_CXX_ALLOWED = re.compile(
    r"^(-O[0-3s]|-Ofast|-std=(c|gnu)\+\+(14|17|20)|-[DU][A-Za-z_][A-Za-z0-9_]*(=[^\s;|&`$]*)?"
    r"|-march=native|-mtune=native|-mavx2|-mfma|-mavx512f|-ffast-math|-funroll-loops"
    r"|-fno-math-errno|-fopenmp|-g|-w|-Wall|-Wextra|-fPIC)$"
)
_CUDA_ALLOWED = re.compile(
    r"^(-O[0-3]|--?use_fast_math|-lineinfo|--expt-relaxed-constexpr|--expt-extended-lambda"
    r"|--extended-lambda|-std=c\+\+(14|17|20)|-[DU][A-Za-z_][A-Za-z0-9_]*(=[^\s;|&`$]*)?"
    r"|--?maxrregcount=\d+|-Xptxas=[-\w,=]+|--ptxas-options=[-\w,=]+|-res-usage|--resource-usage"
    r"|-w|-g|-G|--restrict|-Xcompiler=-fopenmp|--default-stream=per-thread)$"
)
_CUDA_ARCH = re.compile(r"^(-arch=|--gpu-architecture=|-gencode=?|--generate-code=?|-code=)")
_LD_ALLOWED = re.compile(r"^-l(cublas|cublasLt|cudnn|cuda|curand|gomp|m)$")
_LD_IGNORED = re.compile(r"^-L\S+$")


def vet_cxx_flags(flags: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    return tuple(_vet(flags, _CXX_ALLOWED, "C++ compiler"))


def vet_cuda_flags(flags: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """nvcc flags; architecture flags are dropped (the harness targets the GPU it runs on)."""
    cleaned: list[str] = []
    items = [f.strip() for f in flags or () if f and f.strip()]
    i = 0
    while i < len(items):
        flag = items[i]
        if flag in ("-Xptxas", "--ptxas-options") and i + 1 < len(items):
            flag = f"-Xptxas={items[i + 1]}"
            i += 1
        if _CUDA_ARCH.match(flag):
            if flag in ("-gencode", "--generate-code") and i + 1 < len(items):
                i += 1
            i += 1
            continue
        if not _CUDA_ALLOWED.match(flag):
            raise FlagError(f"nvcc flag {flag!r} is not allowed")
        cleaned.append(flag)
        i += 1
    return tuple(cleaned)


def vet_ld_flags(flags: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    kept = []
    for flag in (f.strip() for f in flags or () if f and f.strip()):
        if _LD_IGNORED.match(flag):
            continue
        if not _LD_ALLOWED.match(flag):
            raise FlagError(
                f"linker flag {flag!r} is not allowed "
                "(allowed: -lcublas -lcublasLt -lcudnn -lcuda -lcurand -lgomp -lm)"
            )
        kept.append(flag)
    return tuple(kept)


def _vet(
    flags: list[str] | tuple[str, ...] | None, allowed: re.Pattern[str], what: str
) -> list[str]:
    kept = []
    for flag in (f.strip() for f in flags or () if f and f.strip()):
        for part in flag.split():
            if not allowed.match(part):
                raise FlagError(f"{what} flag {part!r} is not allowed")
            kept.append(part)
    return kept
