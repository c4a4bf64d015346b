"""Turn an ``ExtensionSpec`` into a loadable shared library, with a content-addressed cache.

Two cache levels, both shared by every worker on the machine (atomic renames, file locks):

* objects: each translation unit is compiled once per (its text, the spec's headers, the
  command line, the toolchain). An agent that edits one kernel recompiles only that file;
  the fixed binding file of the workdir template compiles once per toolchain.
* extensions: the linked ``.so`` keyed by its objects and link flags; an unchanged solution
  costs no build at all.

Translation units compile in parallel (one process each, C++ with g++, CUDA with nvcc), under
one deadline for the whole build; on timeout the compiler's process group is killed. We drive
the compilers directly rather than through ninja: ninja's mtime-and-log model cannot share a
content-addressed object store between concurrent builds. Failures come back as an
agent-readable summary (``compiler_log.summarise``), never as an exception.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.core.paths import builds_dir, ensure_dir, private_builds_dir
from cuda_agent.evaluator.builder.cache_entry import locked, seal, usable
from cuda_agent.evaluator.builder.compiler_log import summarise
from cuda_agent.evaluator.builder.light_index import ensure_index
from cuda_agent.evaluator.builder.pch import ensure_pch
from cuda_agent.evaluator.builder.spec import ExtensionSpec
from cuda_agent.evaluator.builder.toolchain import Toolchain, ToolchainError, discover
from cuda_agent.evaluator.builder.units import (
    BUILDER_VERSION,
    MAX_LOG_CHARS,
    NAME_HEADER,
    Unit,
    compile_unit,
    digest,
    failure_message,
    plan_light,
    plan_unit,
    run_compiler,
    write_source,
)

LAYOUTS = ("auto", "light", "stock")
# a light failure in the sources' own code, which stock would repeat (not compiled)
OWN_FAILURE_LAYOUT = "light (own error; stock alike, not compiled)"
LAYOUTS_FILE = "layouts.json"  # next to a cached extension: how each unit was compiled


@dataclass
class BuildResult:
    ok: bool
    module_name: str
    module_path: Path | None = None
    cached: bool = False
    seconds: float = 0.0
    objects_built: int = 0
    objects_cached: int = 0
    error: str | None = None
    log: str = ""
    key: str = ""
    layouts: dict[str, str] = field(default_factory=dict)  # unit -> "light" / "stock" / ...

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "module": self.module_name,
            "path": str(self.module_path) if self.module_path else None,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
            "objects_built": self.objects_built,
            "objects_cached": self.objects_cached,
            "error": self.error,
            "layouts": dict(self.layouts),
        }


def build_extension(
    spec: ExtensionSpec,
    *,
    timeout_s: float = 600.0,
    jobs: int | None = None,
    layout: str = "auto",
    cached_only: bool = False,
) -> BuildResult:
    """Build ``spec`` (or fetch it from the cache). Never raises for a candidate's mistake.

    ``layout`` is for tests and benchmarks: ``"auto"`` (light where it applies, stock when
    the light text fails), ``"light"`` (light where it applies, no fallback) or ``"stock"``.
    ``cached_only``: return the cached module if there is one, else at once (``ok`` False,
    no ``error``) without compiling anything.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}")
    start = time.monotonic()
    deadline = start + timeout_s
    result = BuildResult(ok=False, module_name=spec.name)
    try:
        toolchain = discover(spec.backend)
    except ToolchainError as err:
        result.error = str(err)
        return result
    if spec.backend == "cpu" and any(f.is_cuda for f in spec.files):
        cuda_files = ", ".join(f.name for f in spec.files if f.is_cuda)
        result.error = f"CUDA sources ({cuda_files}) cannot be built for the cpu backend"
        return result
    if not spec.translation_units:
        result.error = "nothing to compile: no .cpp or .cu source files"
        return result
    root = _writable_root(builds_dir())
    try:
        units = [plan_unit(spec, toolchain, src, root) for src in spec.translation_units]
    except ToolchainError as err:
        result.error = str(err)
        return result
    result.key = digest(
        BUILDER_VERSION,
        toolchain.identity,
        spec.name,
        *sorted(u.key for u in units),
        *spec.ldflags,
        *([] if layout == "auto" else [layout]),
    )
    final = root / "ext" / result.key / f"{spec.name}.so"
    shared = builds_dir() / "ext" / result.key / f"{spec.name}.so"
    if shared.exists():  # a read-only shared cache (sandboxed worker) still serves hits
        final = shared
    if usable(final):
        _cache_hit(result, final)
        result.objects_cached = len(units)
        result.seconds = time.monotonic() - start
        return result
    if cached_only:
        result.seconds = time.monotonic() - start
        return result
    if shared.exists() and final == shared:
        final = root / "ext" / result.key / f"{spec.name}.so"  # it failed its check: rebuild
    with locked(root / "locks" / f"{result.key}.lock", deadline):
        if usable(final):
            _cache_hit(result, final)
        else:
            if final.parent.exists():
                shutil.rmtree(final.parent, ignore_errors=True)
            if layout != "stock":
                plan_light(spec, toolchain, units, root, deadline)
            _build_into(spec, toolchain, units, final, root, deadline, jobs, result, layout)
    result.seconds = time.monotonic() - start
    return result


def _cache_hit(result: BuildResult, final: Path) -> None:
    result.ok, result.cached, result.module_path = True, True, final
    with contextlib.suppress(OSError, ValueError):
        result.layouts = json.loads((final.parent / LAYOUTS_FILE).read_text(encoding="utf-8"))


def _writable_root(shared: Path) -> Path:
    """The shared cache, or this process's private one when the shared cache is read-only."""
    private = private_builds_dir()
    try:
        ensure_dir(shared)
        if _can_write(shared):
            return shared
    except OSError:
        pass
    if private is not None:
        return ensure_dir(private)
    return ensure_dir(shared)


def _can_write(folder: Path) -> bool:
    """Whether a file can be created in ``folder``. Tried, not asked: ``os.access`` consults
    only the owner and mode bits, and Landlock (a confined worker) denies beyond them."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".write-probe-")
    except OSError:
        return False
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return True


def _build_into(
    spec: ExtensionSpec,
    toolchain: Toolchain,
    units: list[Unit],
    final: Path,
    root: Path,
    deadline: float,
    jobs: int | None,
    result: BuildResult,
    layout: str,
) -> None:
    ensure_dir(root / "obj")
    workdir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=ensure_dir(root / "tmp")))
    try:
        (workdir / NAME_HEADER).write_text(f"#define TORCH_EXTENSION_NAME {spec.name}\n")
        for f in spec.files:
            write_source(workdir / f.name, f.text)
        objects: dict[str, Path] = {}
        todo: list[Unit] = []
        for unit in units:
            ready = unit.ready(layout)
            if ready is None:
                todo.append(unit)
            else:
                objects[unit.source.name] = ready.cached_object
                result.layouts[unit.source.name] = ready.layout
        result.objects_cached = len(units) - len(todo)
        logs: list[str] = []
        failed: list[str] = []
        workers = max(1, min(len(todo), jobs or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(lambda u: compile_unit(u, workdir, deadline, layout), todo))
        for unit, (variant, ok, log) in zip(todo, outcomes, strict=True):
            name = unit.source.name
            result.layouts[name] = variant.layout
            if unit.light is not None and variant is unit.stock:
                result.layouts[name] = "stock (light failed)"
            elif variant is unit.light and not ok and layout == "auto":
                result.layouts[name] = OWN_FAILURE_LAYOUT
            if log.strip():
                logs.append(f"$ compile {name}\n{log}")
            if ok:
                result.objects_built += 1
                objects[name] = variant.cached_object
            else:
                failed.append(name)
        result.log = "\n".join(logs)[-MAX_LOG_CHARS:]
        if failed:
            result.error = failure_message(failed, result.log)
            return
        output = workdir / f"{spec.name}.so"
        ordered = [str(objects[u.source.name]) for u in units]
        ok, log = run_compiler(
            toolchain.link_command(ordered, str(output), spec.ldflags), workdir, deadline
        )
        if log.strip():
            result.log = (result.log + f"\n$ link {spec.name}.so\n{log}")[-MAX_LOG_CHARS:]
        if not ok:
            result.error = "link failed:\n" + summarise(log)
            return
        staging = Path(tempfile.mkdtemp(prefix="ext-", dir=root / "tmp"))
        os.chmod(staging, 0o755)  # readable to sandboxed workers of another uid
        shutil.move(str(output), staging / final.name)
        seal(staging / final.name, entry=final.parent.name)
        (staging / LAYOUTS_FILE).write_text(json.dumps(result.layouts), encoding="utf-8")
        final.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, final.parent)
        except OSError:  # another process finished the same extension first
            shutil.rmtree(staging, ignore_errors=True)
        result.ok, result.module_path = True, final
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def warm_up(
    backend: str,
    cflag_sets: tuple[tuple[str, ...], ...] = ((), ("-O3",)),
    *,
    stock_pch: bool = False,
    timeout_s: float = 900.0,
) -> dict[str, float]:
    """Build ahead what the first ``load_inline`` candidate would otherwise wait for.

    The light header index, and the precompiled base header of ``main.cpp`` for each set of
    ``extra_cflags`` given (``-O3`` is what most candidates pass); with ``stock_pch`` also
    the precompiled ``torch/extension.h`` that the stock layout of ``main.cpp`` uses. Returns
    seconds per step. Safe to call from several processes at once (the steps take locks).
    """
    from cuda_agent.evaluator.builder.inline import inline_spec  # local: inline imports spec only

    start = time.monotonic()
    deadline = start + timeout_s
    toolchain = discover(backend)
    root = _writable_root(builds_dir())
    times = {"index": 0.0}
    ensure_index(root, toolchain, deadline)
    times["index"] = round(time.monotonic() - start, 3)
    for flags in cflag_sets:
        spec = inline_spec(backend, "ca_warm_up", "", extra_cflags=list(flags))
        units = [plan_unit(spec, toolchain, src, root) for src in spec.translation_units]
        plan_light(spec, toolchain, units, root, deadline)
        for unit in units:
            variants = [unit.light] + ([unit.stock] if stock_pch else [])
            for variant in variants:
                if variant is None or variant.pch is None or variant.pch_base is None:
                    continue
                step = time.monotonic()
                ensure_pch(variant.pch, variant.pch_text, variant.pch_base, deadline)
                label = f"pch {variant.layout} {' '.join(flags) or '(default flags)'}"
                times[label] = round(time.monotonic() - step, 3)
    return times
