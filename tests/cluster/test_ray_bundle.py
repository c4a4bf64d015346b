"""benchmarks/ray_bundle.py and benchmarks/ray_wheels.py on small fake wheels: Ray's dependency
closure against the device image, unpacking wheels, stripping, packing into one .tar.xz,
unpacking it into a target and checking what it leaves to the image. No network: the wheels are
made here."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
HERE_PY = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture(scope="module")
def rb() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ray_bundle", REPO / "benchmarks/ray_bundle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ray_bundle"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rw(rb: ModuleType) -> ModuleType:
    """benchmarks/ray_wheels.py, as ray_bundle.py imports it."""
    return importlib.import_module("benchmarks.ray_wheels")


def wheel(
    folder: Path, name: str, version: str, files: dict[str, bytes], requires: list[str]
) -> Path:
    """A wheel of ``name`` with ``files`` (a name ending in ``*`` is made executable)."""
    stem = name.replace("-", "_")
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    meta = "Metadata-Version: 2.1\nName: {}\nVersion: {}\n{}".format(
        name, version, "".join(f"Requires-Dist: {r}\n" for r in requires)
    )
    with zipfile.ZipFile(path, "w") as zf:
        for rel, data in files.items():
            info = zipfile.ZipInfo(rel.rstrip("*"))
            info.external_attr = (0o755 if rel.endswith("*") else 0o644) << 16
            zf.writestr(info, data)
        zf.writestr(f"{stem}-{version}.dist-info/METADATA", meta)
    return path


RAY_FILES = {
    "ray/__init__.py": b"VERSION = 'fake'\n",
    "ray/core/src/ray/raylet/raylet*": b"#!/bin/sh\necho raylet\n",
    "ray/jars/ray_dist.jar": b"x" * 5000,
    "ray/rllib/__init__.py": b"# rl\n" * 100,
    "ray/serve/__init__.py": b"",
    "ray/dashboard/agent.py": b"# the agent stays\n",
    "ray/dashboard/client/build/index.html": b"<html>" * 300,
    "ray/_private/tests/test_x.py": b"def test(): pass\n",
    "ray/__pycache__/x.cpython-312.pyc": b"\0" * 10,
    "ray-2.60.0.data/purelib/ray_extra.py": b"EXTRA = 1\n",
    "ray-2.60.0.data/scripts/ray*": b"#!python\n",
}


def test_the_closure_carries_what_the_image_lacks(rw: ModuleType, tmp_path: Path) -> None:
    wheel(
        tmp_path,
        "ray",
        "2.60.0",
        RAY_FILES,
        [
            "click>=7.0",
            "jsonschema",
            'msgpack<2.0.0,>=1.0.0; python_version >= "3.9"',
            'tomli; python_version < "3.11"',
            'pandas>=1.3; extra == "data"',
        ],
    )
    wheel(
        tmp_path,
        "jsonschema",
        "4.26.0",
        {"jsonschema/__init__.py": b""},
        ["attrs>=22.2.0", "rpds-py>=0.7.1"],
    )
    wheel(tmp_path, "rpds-py", "0.30.0", {"rpds/__init__.py": b""}, ["attrs>=22.2.0"])
    pins = {"ray": "2.60.0", "jsonschema": "4.26.0", "rpds-py": "0.30.0", "click": "8.1.0"}
    present = {"click", "msgpack", "attrs", "pandas"}
    carry, needs = rw.resolve(pins, present, "3.12", tmp_path)
    assert sorted(carry) == ["jsonschema", "ray", "rpds-py"]  # tomli: not for 3.12; pandas: extra
    assert needs == {"click": ">=7.0", "msgpack": "<2.0.0,>=1.0.0", "attrs": ">=22.2.0"}
    with pytest.raises(SystemExit, match="not pinned"):
        rw.resolve({"ray": "2.60.0", "click": "8.1.0"}, {"click"}, "3.12", tmp_path)


def test_unpack_strip_pack_and_unpack_again(rb: ModuleType, rw: ModuleType, tmp_path: Path) -> None:
    root = tmp_path / "site"
    rw.unpack_wheel(wheel(tmp_path, "ray", "2.60.0", RAY_FILES, []), root)
    assert (root / "ray_extra.py").exists()  # purelib lands at the root
    assert not (root / "ray-2.60.0.data").exists() and (root / "ray").is_dir()  # no scripts
    raylet = root / "ray/core/src/ray/raylet/raylet"
    assert raylet.stat().st_mode & 0o111
    removed = rw.strip_tree(root)
    for rel in ("ray/jars", "ray/rllib", "ray/serve", "ray/dashboard/client", "ray/_private/tests"):
        assert not (root / rel).exists(), rel
    assert not (root / "ray/__pycache__").exists()
    assert (root / "ray/dashboard/agent.py").exists() and (root / "ray/__init__.py").exists()
    assert removed["ray/jars"] == 5000 and removed["*/tests/"] > 0
    assert "ray/data" not in removed  # not in this wheel: nothing to count

    bundle = tmp_path / "bundle.tar.xz"
    manifest = {"python": HERE_PY, "needs_present": {"packaging": ">=20"}, "unpacked_bytes": 1}
    rb.pack(root, manifest, bundle)
    with tarfile.open(bundle, "r:xz") as tar:
        names = tar.getnames()
        assert names[0] == rb.MANIFEST and all(tar.getmember(n).mtime == 0 for n in names)
    target = tmp_path / "target"
    assert rb.unpack(bundle, target)["python"] == HERE_PY
    kept = sorted(p.relative_to(root) for p in root.rglob("*") if p.is_file())
    got = sorted(p.relative_to(target) for p in target.rglob("*") if p.is_file())
    assert got == sorted([*kept, Path(rb.MANIFEST)])
    assert (target / "ray/core/src/ray/raylet/raylet").stat().st_mode & 0o111
    assert subprocess.run([target / "ray/core/src/ray/raylet/raylet"], capture_output=True).stdout
    rb.unpack(bundle, target)  # an earlier bundle's folder is replaced
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not empty"):
        rb.unpack(bundle, tmp_path / "other")
    manifest["python"] = "2.7"
    rb.pack(root, manifest, bundle)
    with pytest.raises(SystemExit, match=r"Python 2\.7"):
        rb.unpack(bundle, tmp_path / "t2")


def test_check_reports_missing_and_wrong_versions(rb: ModuleType) -> None:
    assert rb.check({"needs_present": {"packaging": ">=20", "pytest": ""}}) == []
    problems = rb.check({"needs_present": {"no-such-package-xyz": "", "packaging": "<1"}})
    assert len(problems) == 2
    assert "no-such-package-xyz is not installed" in problems[0]
    assert "Ray needs packaging<1" in problems[1]


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        ("1.2.4", ">=1.0.0,<2.0.0", True),
        ("2.0", "<2.0.0", False),
        ("2", "==2.0", True),
        ("24.2", ">=24.2", True),
        ("7.36.2", ">=3.20.3", True),
        ("3.20.2", ">=3.20.3", False),
        ("1.0", "!=1", False),
    ],
)
def test_plain_specifiers(rb: ModuleType, version: str, spec: str, ok: bool) -> None:
    assert rb.plain_satisfies(version, spec) is ok
    assert rb.satisfies(version, spec) is ok  # packaging agrees


@pytest.mark.slow  # compiles and strips a library
@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("strip") is None, reason="no gcc")
def test_strip_binaries_keeps_a_working_library(rw: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "lib.c").write_text("int answer(void) { return 42; }\n")
    lib = tmp_path / "tree" / "libanswer.so"
    lib.parent.mkdir()
    subprocess.run(["gcc", "-g", "-shared", "-fPIC", "-o", lib, tmp_path / "lib.c"], check=True)
    (tmp_path / "tree" / "notes.txt").write_text("not an ELF file")
    before = lib.stat().st_size
    saved = rw.strip_binaries(tmp_path / "tree")
    assert saved == before - lib.stat().st_size > 0
    import ctypes

    assert ctypes.CDLL(str(lib)).answer() == 42
