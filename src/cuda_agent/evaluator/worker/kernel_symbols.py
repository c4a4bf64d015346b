"""The device names of the kernels a compiled module registers: what the memory check checks.

compute-sanitizer filters kernels by their *device* (mangled) name, which is not always the
name of the host function that launches them (nvcc marks a ``static`` or templated kernel's
host stub with internal linkage: ``_ZL13static_kernelPf`` on the host, ``_Z13static_kernelPf``
on the device). nvcc registers every kernel of a translation unit with the CUDA runtime under
its device name, a string constant in the module's read-only data. So a kernel's device name
is a NUL-terminated string in a ``.rodata`` section of the module that is a mangled C++ name
(``_Z...``) or the name of a function the module defines (an ``extern "C"`` kernel's host stub
keeps its plain name). ``device_kernel_names`` returns those strings (suffixes too: the linker
may store a string as the tail of a longer one). The set can hold a few names that are not
kernels (the static CUDA runtime's own function names, say): as filters they match no
kernel launch, or make the checker check one more kernel, never one fewer.

Triton kernels live in no module: their names come from the harness's launch hook
(``triton_launches``). Kernels a candidate loads by other means at run time (the driver API,
NVRTC) are in neither list.

What it does not do: run anything on a device, or decide what is checked (the parent's
``evaluator/checks/memory_safety.py`` turns the names into the checker's kernel filter).
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
from collections.abc import Iterable
from pathlib import Path

MAX_NAMES = 4000  # more than this: the caller checks every kernel instead
_TOKEN = re.compile(rb"([A-Za-z_$][A-Za-z0-9_$]*)\x00")
_ELF64 = b"\x7fELF\x02"


def device_kernel_names(modules: Iterable[Path]) -> list[str] | None:
    """The device names of the kernels ``modules`` register, sorted; None when one of them
    cannot be read (not a 64-bit ELF file, no ``nm``) or the names are too many to filter by."""
    names: set[str] = set()
    for module in modules:
        found = _module_kernel_names(Path(module))
        if found is None:
            return None
        names |= found
    return sorted(names) if len(names) <= MAX_NAMES else None


def _module_kernel_names(module: Path) -> set[str] | None:
    try:
        data = module.read_bytes()
    except OSError:
        return None
    sections = rodata_sections(data)
    defined = defined_functions(module)
    if sections is None or defined is None:
        return None
    names: set[str] = set()
    for section in sections:
        for match in _TOKEN.finditer(section):
            token = match.group(1).decode("ascii")
            names.update(_kernel_like_suffixes(token, defined))
    return names


def _kernel_like_suffixes(token: str, defined: set[str]) -> set[str]:
    """The suffixes of ``token`` that may be a kernel's device name."""
    found = set()
    for i in range(len(token)):
        tail = token[i:]
        if tail.startswith("_Z") or tail in defined:
            found.add(tail)
    return found


def rodata_sections(data: bytes) -> list[bytes] | None:
    """The contents of a 64-bit little-endian ELF file's ``.rodata*`` sections (None when
    ``data`` is not one)."""
    if len(data) < 0x40 or not data.startswith(_ELF64) or data[5] != 1:
        return None
    try:
        shoff = struct.unpack_from("<Q", data, 0x28)[0]
        entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
        headers = [
            struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)
        ]
        names_offset = headers[names_index][4]
    except (struct.error, IndexError):
        return None
    out = []
    for header in headers:
        name_at, _kind, _flags, _addr, offset, size = header[:6]
        start = names_offset + name_at
        end = data.find(b"\x00", start)
        if end < 0:
            return None
        name = data[start:end]
        if name == b".rodata" or name.startswith(b".rodata."):
            out.append(data[offset : offset + size])
    return out


def defined_functions(module: Path) -> set[str] | None:
    """The (mangled) names of the functions ``module`` defines, by ``nm`` (None without it)."""
    nm = shutil.which("nm")
    if nm is None:
        return None
    proc = subprocess.run(
        [nm, "--defined-only", str(module)], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return None
    names = set()
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "t", "W", "w"):
            names.add(parts[2])
    return names
