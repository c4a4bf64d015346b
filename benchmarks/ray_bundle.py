"""The Ray carry bundle for the GPU machines: build it here, unpack and check it there.

The GPU image has no Ray and no network, and a device call carries at most 64 MiB. This script
puts Ray (the version pinned in requirements.lock) and each of its dependencies missing from the
image (benchmarks/device_image_packages.txt) into one ``.tar.xz`` under ``.raybundle/``, stripped
of what RayPool never imports: Java (``ray/jars``), RLlib, Serve, Data, Tune, Train, LLM, the
dashboard's web client, test folders, and the symbol tables of Ray's binaries.

  build   (here; needs pip and PyPI) download the wheels for one CPython version on manylinux
          x86_64 (kept in ``.raybundle-wheels/``), unpack them into one tree, strip it, write
          the bundle and its manifest
  unpack  (there; standard library only) the bundle into ``--target`` (put it on PYTHONPATH),
          then ``check``
  check   (there) the dependencies the bundle left to the image are installed, in versions Ray
          accepts (exit 1 if not)
  smoke   (with the target on PYTHONPATH) ``ray.init()``, a task, and actors: ``--gpus N`` GPU
          actors (each must see its own GPU) or ``--actors N`` CPU actors; exit 1 on failure

  python3 benchmarks/ray_bundle.py build [--python-version 3.12]
  python3 benchmarks/ray_bundle.py unpack .raybundle/ray-2.60.0-cp312.tar.xz --target /tmp/ray
  PYTHONPATH=/tmp/ray python3 benchmarks/ray_bundle.py smoke --gpus 2

It installs nothing into an environment and does not run RayPool (benchmarks/ray_fault.py
does). Only ``build`` imports anything beyond the standard library (``packaging``); the wheels'
closure, download, unpacking and stripping are in benchmarks/ray_wheels.py.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_OUT = REPO / ".raybundle"  # bundles only: carry one file of it to the device
DEFAULT_WHEELS = REPO / ".raybundle-wheels"  # the downloaded wheels, per Python tag
DEFAULT_LOCK = REPO / "requirements.lock"
DEFAULT_PRESENT = HERE / "device_image_packages.txt"
MANIFEST = ".ray-bundle.json"
if not __package__ and str(REPO) not in sys.path:  # run as a script: sys.path[0] is benchmarks/
    sys.path.insert(0, str(REPO))

from benchmarks.ray_wheels import (  # noqa: E402
    read_lock,
    read_present,
    resolve,
    strip_binaries,
    strip_tree,
    tree_bytes,
    unpack_wheel,
)

# ---------------------------------------------------------------- build (the wheels: ray_wheels.py)


def pack(root: Path, manifest: dict[str, Any], out: Path, preset: int = 6) -> None:
    """``root``'s files and the manifest into one ``.tar.xz`` (sorted, owner and times reset)."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        return info

    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, "w:xz", preset=preset) as tar:
        data = json.dumps(manifest, indent=1, sort_keys=True).encode()
        info = clean(tarfile.TarInfo(MANIFEST))
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                tar.add(path, arcname=path.relative_to(root).as_posix(), filter=clean)
    tmp.replace(out)


def build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    pins = read_lock(args.lock)
    present = read_present(args.present)
    tag = "cp" + args.python_version.replace(".", "")
    out_dir: Path = args.out
    wheels = args.wheels / tag
    wheels.mkdir(parents=True, exist_ok=True)
    carry, needs_present = resolve(pins, present, args.python_version, wheels)
    wheel_bytes = sum(w.stat().st_size for w in carry.values())
    print(
        f"carry {len(carry)} wheels ({wheel_bytes / 2**20:.1f} MiB): "
        + ", ".join(f"{n} {pins[n]}" for n in sorted(carry))
    )
    print(
        "left to the device image: "
        + ", ".join(f"{n}{s}" for n, s in sorted(needs_present.items()))
    )
    with tempfile.TemporaryDirectory(prefix="raybundle-") as tmp:
        root = Path(tmp) / "site"
        for wheel in carry.values():
            unpack_wheel(wheel, root)
        unpacked = tree_bytes(root)
        removed = strip_tree(root)
        if args.strip_binaries:
            if shutil.which("strip") is None:
                raise SystemExit("no 'strip' on PATH: install binutils or pass --keep-symbols")
            removed["ELF symbol tables"] = strip_binaries(root)
        kept = tree_bytes(root)
        manifest = {
            "format": 1,
            "python": args.python_version,
            "platform": "manylinux x86_64",
            "packages": {n: pins[n] for n in sorted(carry)},
            "needs_present": dict(sorted(needs_present.items())),
            "removed_bytes": removed,
            "unpacked_bytes": kept,
        }
        name = f"ray-{pins['ray']}-{tag}.tar.xz"
        out = out_dir / name
        pack(root, manifest, out, preset=args.preset)
    print(f"unpacked {unpacked / 2**20:.1f} MiB, stripped to {kept / 2**20:.1f} MiB:")
    for rule, size in sorted(removed.items(), key=lambda kv: -kv[1]):
        print(f"  - {size / 2**20:7.2f} MiB  {rule}")
    print(f"bundle {out} {out.stat().st_size / 2**20:.2f} MiB ({time.monotonic() - started:.0f} s)")
    return 0


# ---------------------------------------------------------------- device side (stdlib only)


def read_manifest(bundle: Path) -> dict[str, Any]:
    with tarfile.open(bundle, "r:xz") as tar:
        member = tar.extractfile(MANIFEST)
        if member is None:
            raise SystemExit(f"{bundle} has no {MANIFEST}: not a Ray bundle")
        manifest: dict[str, Any] = json.load(member)
    return manifest


def unpack(bundle: Path, target: Path) -> dict[str, Any]:
    """Extract ``bundle`` into ``target`` (absent, empty, or an earlier bundle's folder)."""
    manifest = read_manifest(bundle)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if manifest["python"] != here:
        raise SystemExit(f"the bundle is for Python {manifest['python']}, this is Python {here}")
    if target.exists() and any(target.iterdir()):
        if not (target / MANIFEST).exists():
            raise SystemExit(f"{target} is not empty and holds no Ray bundle: choose another")
        shutil.rmtree(target)
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(bundle, "r:xz") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(target, filter="data")
        else:  # Python before 3.10.12 / 3.11.4: the bundle is ours, built by `build`
            tar.extractall(target)
    return manifest


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    while parts and parts[-1] == 0:  # 2.0 == 2
        parts.pop()
    return tuple(parts)


def satisfies(version: str, spec: str) -> bool:
    """``version`` in ``spec`` (``packaging`` when importable, else ``plain_satisfies``)."""
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:
        return plain_satisfies(version, spec)
    return version in SpecifierSet(spec)


def plain_satisfies(version: str, spec: str) -> bool:
    """The comparison operators of ``spec`` (``>=1.0,<2``) on release numbers, no packaging."""
    have = version_tuple(version)
    checks = {
        ">=": lambda a, b: a >= b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        "<": lambda a, b: a < b,
        "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
    }
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op = next(o for o in (">=", "<=", "==", "!=", ">", "<") if clause.startswith(o))
        if not checks[op](have, version_tuple(clause[len(op) :])):
            return False
    return True


def check(manifest: dict[str, Any]) -> list[str]:
    """What the bundle needs from this interpreter and does not find (empty: all there)."""
    from importlib import metadata

    problems = []
    for name, spec in manifest.get("needs_present", {}).items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed (Ray needs {name}{spec})")
            continue
        if spec and not satisfies(version, spec):
            problems.append(f"{name} {version} is installed, Ray needs {name}{spec}")
    return problems


def cmd_unpack(args: argparse.Namespace) -> int:
    started = time.monotonic()
    manifest = unpack(args.bundle, args.target)
    size = manifest.get("unpacked_bytes", 0) / 2**20
    seconds = time.monotonic() - started
    print(f"unpacked {args.bundle.name} into {args.target} ({size:.1f} MiB, {seconds:.1f} s)")
    return report_check(manifest)


def cmd_check(args: argparse.Namespace) -> int:
    manifest = json.loads((args.target / MANIFEST).read_text())
    return report_check(manifest)


def report_check(manifest: dict[str, Any]) -> int:
    problems = check(manifest)
    for line in problems:
        print(f"missing: {line}")
    if not problems:
        print(
            "check ok: "
            + ", ".join(f"{n}{s}" for n, s in manifest.get("needs_present", {}).items())
        )
    return 1 if problems else 0


# ---------------------------------------------------------------- smoke test


def probe(want_gpu: bool) -> dict[str, Any]:
    """What one actor sees: its process, the GPU Ray gave it, and a sum computed there."""
    import ray

    seen: dict[str, Any] = {
        "pid": os.getpid(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "ray_gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "ray_from": str(Path(ray.__file__).parent.parent),
    }
    if want_gpu:
        import torch

        props = torch.cuda.get_device_properties(0)
        seen["device_count"] = torch.cuda.device_count()
        seen["name"] = props.name
        seen["uuid"] = str(getattr(props, "uuid", ""))
        seen["sum"] = float(torch.arange(1000, device="cuda", dtype=torch.float32).sum().item())
    return seen


def smoke(args: argparse.Namespace) -> int:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = time.monotonic()
    import ray

    imported = time.monotonic()
    where = Path(ray.__file__).parent
    print(f"ray {ray.__version__} from {where} (import {imported - started:.1f} s)")
    ray.init(include_dashboard=False, log_to_driver=True, num_cpus=args.num_cpus)
    ready = time.monotonic()
    resources = ray.cluster_resources()
    cpus, gpus = resources.get("CPU"), resources.get("GPU", 0)
    print(f"ray.init {ready - imported:.1f} s; resources: CPU {cpus} GPU {gpus}")
    failures = []
    try:
        add = ray.remote(num_cpus=1)(add_numbers)
        total = ray.get(add.remote(20, 22), timeout=120)
        print(f"task: 20 + 22 = {total} ({time.monotonic() - ready:.1f} s)")
        if total != 42:
            failures.append(f"the task returned {total}")
        count = args.gpus or args.actors
        options: dict[str, Any] = {"num_gpus": 1} if args.gpus else {"num_cpus": 1}
        actor_class = ray.remote(**options)(Probe)
        before = time.monotonic()
        actors = [actor_class.remote(bool(args.gpus)) for _ in range(count)]
        seen = ray.get([a.where.remote() for a in actors], timeout=300)
        kind = "GPU" if args.gpus else "CPU"
        print(f"{count} {kind} actor(s) in {time.monotonic() - before:.1f} s:")
        for row in seen:
            print("  " + json.dumps(row, sort_keys=True))
        failures += actor_failures(seen, bool(args.gpus))
    finally:
        ray.shutdown()
    for line in failures:
        print(f"FAILED: {line}")
    print("smoke ok" if not failures else "smoke FAILED", f"({time.monotonic() - started:.1f} s)")
    return 1 if failures else 0


def add_numbers(a: int, b: int) -> int:
    return a + b


class Probe:
    def __init__(self, want_gpu: bool) -> None:
        self.want_gpu = want_gpu

    def where(self) -> dict[str, Any]:
        return probe(self.want_gpu)


def actor_failures(seen: list[dict[str, Any]], gpus: bool) -> list[str]:
    failures = []
    pids = {row["pid"] for row in seen}
    if len(pids) != len(seen):
        failures.append("two actors share a process")
    if gpus:
        visible = [row["cuda_visible_devices"] for row in seen]
        if len(set(visible)) != len(visible) or None in visible:
            failures.append(f"the GPU actors do not each see their own GPU: {visible}")
        uuids = [row.get("uuid") for row in seen]
        if all(uuids) and len(set(uuids)) != len(uuids):
            failures.append(f"two actors see the same device: {uuids}")
        for row in seen:
            if row.get("device_count") != 1 or row.get("sum") != 499500.0:
                failures.append(f"actor {row['pid']} saw {row}")
    return failures


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download, strip and pack (here)")
    b.add_argument("--python-version", default="3.12", help="CPython of the device (default 3.12)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT)
    b.add_argument("--wheels", type=Path, default=DEFAULT_WHEELS, help="wheel cache folder")
    b.add_argument("--lock", type=Path, default=DEFAULT_LOCK)
    b.add_argument("--present", type=Path, default=DEFAULT_PRESENT, help="packages on the image")
    b.add_argument("--preset", type=int, default=6, help="xz preset (default 6)")
    b.add_argument(
        "--keep-symbols", dest="strip_binaries", action="store_false", help="do not strip ELF files"
    )
    u = sub.add_parser("unpack", help="extract a bundle into --target, then check (device)")
    u.add_argument("bundle", type=Path)
    u.add_argument("--target", type=Path, required=True)
    c = sub.add_parser("check", help="the device image has what the unpacked bundle needs")
    c.add_argument("--target", type=Path, required=True)
    s = sub.add_parser("smoke", help="ray.init, a task and actors (target on PYTHONPATH)")
    s.add_argument("--gpus", type=int, default=0, help="GPU actors, one GPU each")
    s.add_argument("--actors", type=int, default=2, help="CPU actors when --gpus is 0")
    s.add_argument("--num-cpus", type=int, default=None, help="CPUs for the local Ray")
    args = parser.parse_args(argv)
    if args.command == "build":
        return build(args)
    if args.command == "unpack":
        if not args.bundle.is_file():
            print(f"no bundle at {args.bundle}", file=sys.stderr)
            return 2
        return cmd_unpack(args)
    if args.command == "check":
        if not (args.target / MANIFEST).is_file():
            print(f"{args.target} holds no unpacked Ray bundle", file=sys.stderr)
            return 2
        return cmd_check(args)
    return smoke(args)


if __name__ == "__main__":
    sys.exit(main())
