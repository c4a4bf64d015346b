"""Ray's wheels for the carry bundle (benchmarks/ray_bundle.py ``build``), here, before packing.

The dependency closure of Ray against the device image (pins from requirements.lock, the
image's packages from benchmarks/device_image_packages.txt), the wheels downloaded with pip
for one CPython version on manylinux x86_64, each unpacked as an installer would, and the tree
stripped of what RayPool never imports. It packs nothing (``ray_bundle.pack`` does) and runs
nothing on the device; only ``resolve`` imports beyond the standard library (``packaging``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
# Folders RayPool never imports (ray.init, tasks, actors): removed wherever they are.
STRIP_PATHS = (
    "ray/jars",
    "ray/rllib",
    "ray/serve",
    "ray/data",
    "ray/tune",
    "ray/train",
    "ray/llm",
    "ray/dashboard/client",
)
STRIP_NAMES = ("tests", "__pycache__")  # any folder of this name


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: Path) -> dict[str, str]:
    """``name==version`` pins of a requirements file, by normalised name."""
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if "==" in line:
            name, version = line.split("==", 1)
            pins[normalize(name.split("[", 1)[0])] = version.strip()
    return pins


def read_present(path: Path) -> set[str]:
    """Package names (whitespace-separated, ``#`` comments) already on the device image."""
    names: set[str] = set()
    for line in path.read_text().splitlines():
        names.update(normalize(word) for word in line.split("#", 1)[0].split())
    return names


def wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return [
        line.split(":", 1)[1].strip()
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


def marker_env(python_version: str) -> dict[str, str]:
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def download(name: str, version: str, python_version: str, dest: Path) -> Path:
    """The wheel of ``name==version`` for CPython ``python_version`` (cached in ``dest``)."""
    stem = re.sub(r"[-.]+", "_", name).lower()
    found = [w for w in dest.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
    if not found:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            python_version,
            "--implementation",
            "cp",
            *(arg for platform in PLATFORMS for arg in ("--platform", platform)),
            "-d",
            str(dest),
            f"{name}=={version}",
        ]
        subprocess.run(command, check=True)
        found = [w for w in dest.glob("*.whl") if w.name.lower().startswith(f"{stem}-{version}-")]
    if len(found) != 1:
        raise SystemExit(f"expected one wheel of {name}=={version} in {dest}, found {found}")
    return found[0]


def resolve(
    pins: dict[str, str], present: set[str], python_version: str, dest: Path
) -> tuple[dict[str, Path], dict[str, str]]:
    """Ray's dependency closure: wheels to carry, and specifiers left to the device image."""
    from packaging.requirements import Requirement

    env = marker_env(python_version)
    carry: dict[str, Path] = {}
    needs_present: dict[str, str] = {}
    queue = ["ray"]
    while queue:
        name = queue.pop()
        if name not in pins:
            raise SystemExit(f"{name} is not pinned in the lock file: pin it first")
        carry[name] = download(name, pins[name], python_version, dest)
        for text in wheel_requirements(carry[name]):
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            dep = normalize(req.name)
            if dep in present:
                clauses = {*needs_present.get(dep, "").split(","), *str(req.specifier).split(",")}
                needs_present[dep] = ",".join(sorted(filter(None, clauses)))
            elif dep not in carry and dep not in queue:
                if dep in pins and pins[dep] not in req.specifier:
                    raise SystemExit(f"{name} needs {req}, the lock pins {dep}=={pins[dep]}")
                queue.append(dep)
    return carry, needs_present


def unpack_wheel(wheel: Path, root: Path) -> None:
    """Extract a wheel into ``root`` as an installer would (data files left out), keeping
    executable bits."""
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            top, _, rest = info.filename.partition("/")
            name = info.filename
            if top.endswith(".data"):  # purelib / platlib go to the root; scripts, headers: no
                kind, _, name = rest.partition("/")
                if kind not in ("purelib", "platlib"):
                    continue
            if info.is_dir() or not name:
                continue
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
            mode = (info.external_attr >> 16) & 0o777
            if mode & 0o111:
                target.chmod(0o755)


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def strip_tree(
    root: Path, paths: Iterable[str] = STRIP_PATHS, names: Iterable[str] = STRIP_NAMES
) -> dict[str, int]:
    """Remove ``paths`` (relative to ``root``) and every folder called one of ``names``;
    returns the bytes removed per rule."""
    removed: dict[str, int] = {}
    for rel in paths:
        target = root / rel
        if target.exists():
            removed[rel] = tree_bytes(target)
            shutil.rmtree(target)
    names = set(names)
    for folder in sorted(root.rglob("*"), key=lambda p: len(p.parts)):
        if folder.is_dir() and folder.name in names and folder.exists():
            key = f"*/{folder.name}/"
            removed[key] = removed.get(key, 0) + tree_bytes(folder)
            shutil.rmtree(folder)
    return removed


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def strip_binaries(root: Path, strip: str = "strip") -> int:
    """``strip --strip-unneeded`` each ELF file (symbol tables only; dynamic symbols stay);
    returns the bytes saved."""
    saved = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        if not is_elf(path):
            continue
        before = path.stat().st_size
        subprocess.run([strip, "--strip-unneeded", str(path)], check=True)
        saved += before - path.stat().st_size
    return saved
