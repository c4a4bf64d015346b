"""Ship built modules between machines: pack a prepared job's ``.so`` files, unpack them into
the local build cache (same content-addressed paths), so a GPU node need not rebuild what a CPU
node built. Used by the Ray pool; a pool on one machine shares the cache directly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cuda_agent.core.paths import builds_dir, ensure_dir
from cuda_agent.evaluator.prepared import Prepared


def pack(prepared: Prepared) -> dict[str, bytes]:
    root = builds_dir().resolve()
    files = {}
    for build in prepared.builds:
        if build.module_path is None:
            continue
        path = Path(build.module_path).resolve()
        if root in path.parents:
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def unpack(prepared: Prepared, files: dict[str, bytes]) -> Prepared:
    """Write the modules into this machine's cache and point the builds at them."""
    root = ensure_dir(builds_dir())
    local: dict[str, Path] = {}
    for rel, data in files.items():
        target = root / rel
        if not target.exists():
            ensure_dir(target.parent)
            tmp = target.with_name(target.name + ".part")
            tmp.write_bytes(data)
            tmp.replace(target)
        local[Path(rel).name] = target
    builds = [
        replace(b, module_path=local.get(Path(b.module_path).name, b.module_path))
        if b.module_path
        else b
        for b in prepared.builds
    ]
    return replace(prepared, builds=builds)
