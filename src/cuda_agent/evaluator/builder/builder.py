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
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.core import secret
from cuda_agent.core.paths import builds_dir, ensure_dir
from cuda_agent.evaluator.builder.compile_sandbox import confine_compiler
from cuda_agent.evaluator.builder.compiler_log import DIAGNOSTIC, summarise
from cuda_agent.evaluator.builder.compiler_slots import compiler_slot
from cuda_agent.evaluator.builder.light import (
    LightIndex,
    blank_umbrellas,
    light_prelude,
    unit_level,
)
from cuda_agent.evaluator.builder.light_failure import is_own_failure, own_labels, without_hints
from cuda_agent.evaluator.builder.light_index import ensure_index, umbrella_identifiers
from cuda_agent.evaluator.builder.nvcc_pipeline import compile_cu
from cuda_agent.evaluator.builder.pch import PRELUDE, ensure_pch, pch_header, wants_pch
from cuda_agent.evaluator.builder.spec import ExtensionSpec, SourceFile
from cuda_agent.evaluator.builder.toolchain import Toolchain, ToolchainError, discover

log = logging.getLogger(__name__)

BUILDER_VERSION = "5"
PRIVATE_BUILDS_ENV = "CUDA_AGENT_PRIVATE_BUILDS"  # where to build when the cache is read-only
NAME_HEADER = ".ca_extension_name.h"
MAX_LOG_CHARS = 65536
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


@dataclass
class _Variant:
    """One way to compile a unit: its text, command line, cache key and object path."""

    layout: str  # "stock" or "light"
    text: str
    command: list[str]
    key: str
    cached_object: Path
    pch: Path | None = None
    pch_text: str = ""
    pch_base: list[str] | None = None
    index: LightIndex | None = None  # light variants: the index they were planned with


@dataclass
class _Unit:
    source: SourceFile
    stock: _Variant
    light: _Variant | None = None

    @property
    def key(self) -> str:
        return self.stock.key

    def ready(self, layout: str = "auto") -> _Variant | None:
        """The variant whose object is already cached, if any (light first)."""
        light = self.light
        if light is not None and layout == "light":
            return light if usable(light.cached_object) else None
        if light is not None and layout == "auto" and not _light_failed(light):
            if usable(light.cached_object):
                return light
        elif usable(self.stock.cached_object):
            return self.stock
        return None


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
        units = [_plan_unit(spec, toolchain, src, root) for src in spec.translation_units]
    except ToolchainError as err:
        result.error = str(err)
        return result
    result.key = _digest(
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
                _plan_light(spec, toolchain, units, root, deadline)
            _build_into(spec, toolchain, units, final, root, deadline, jobs, result, layout)
    result.seconds = time.monotonic() - start
    return result


def _cache_hit(result: BuildResult, final: Path) -> None:
    result.ok, result.cached, result.module_path = True, True, final
    with contextlib.suppress(OSError, ValueError):
        result.layouts = json.loads((final.parent / LAYOUTS_FILE).read_text(encoding="utf-8"))


def _writable_root(shared: Path) -> Path:
    """The shared cache, or this process's private one when the shared cache is read-only."""
    private = os.environ.get(PRIVATE_BUILDS_ENV)
    try:
        ensure_dir(shared)
        if _can_write(shared):
            return shared
    except OSError:
        pass
    if private:
        return ensure_dir(Path(private))
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


def _plan_unit(spec: ExtensionSpec, toolchain: Toolchain, src: SourceFile, root: Path) -> _Unit:
    """The unit's stock variant; its key identifies the unit (and, with the others, the
    extension), whichever layout ends up compiling it."""
    stock_pch = ""
    if not src.is_cuda and src.body_offset is not None:
        stock_pch = src.prelude  # stock's own prelude (torch/extension.h), precompiled
    elif not src.is_cuda and wants_pch(src.text):
        stock_pch = PRELUDE
    stock = _variant(spec, toolchain, src, src.text, root, stock_pch, None)
    return _Unit(src, stock)


def _plan_light(
    spec: ExtensionSpec, toolchain: Toolchain, units: list[_Unit], root: Path, deadline: float
) -> None:
    """Add the light variant to each ``load_inline`` unit it applies to (units that see a
    torch umbrella header: ``torch/types.h`` or ``torch/extension.h``)."""
    levels = {
        u.source.name: unit_level(u.source.prelude, u.source.body)
        for u in units
        if u.source.body_offset is not None
    }
    if not any(levels.values()):
        return
    index = ensure_index(root, toolchain, deadline)
    if index is None:
        return
    for unit in units:
        src = unit.source
        if not levels.get(src.name):
            continue
        kind = "cuda" if src.is_cuda else "cxx"
        body = src.body
        prelude = light_prelude(index, kind, levels[src.name], body)
        if prelude is not None:
            text = prelude + blank_umbrellas(body)
            pch = "" if src.is_cuda else f"#include <{index.base_header[kind]}>\n"
            unit.light = _variant(spec, toolchain, src, text, root, pch, index)


def _variant(
    spec: ExtensionSpec,
    toolchain: Toolchain,
    src: SourceFile,
    text: str,
    root: Path,
    pch_text: str,
    index: LightIndex | None,
) -> _Variant:
    header_hash = _digest(*(f"{h.name}\0{h.text}" for h in spec.headers))
    layout = "stock" if index is None else "light"
    shadow = [] if index is None else [f"-I{index.shadow_dir}"]
    shadow_key = [] if index is None else [f"-I<shadow:{index.key}>"]
    pch: Path | None = None
    base: list[str] | None = None
    if src.is_cuda:
        nvcc = toolchain.nvcc_command(spec.cuda_cflags, spec.name)
        command, keyed = [nvcc[0], *shadow, *nvcc[1:]], [nvcc[0], *shadow_key, *nvcc[1:]]
    else:
        cxx = toolchain.cxx_command(spec.cflags)
        base, keyed_base = [*cxx[:1], *shadow, *cxx[1:]], [*cxx[:1], *shadow_key, *cxx[1:]]
        command = [*base, "-include", NAME_HEADER]
        keyed = [*keyed_base, "-include", NAME_HEADER]
        if pch_text:
            pch_key = _digest(BUILDER_VERSION, toolchain.identity, pch_text, *keyed_base)
            shared = pch_header(builds_dir(), pch_key)
            built = shared.with_name(shared.name + ".gch").exists()
            pch = shared if built else pch_header(root, pch_key)
            command = [*base, "-include", str(pch), "-include", NAME_HEADER]
            keyed = [*keyed_base, "-include", f"<pch:{pch_key}>", "-include", NAME_HEADER]
    native = any(flag.startswith(("-march=native", "-mtune=native")) for flag in command)
    host = toolchain.host_cpu if native else ""
    key = _digest(
        BUILDER_VERSION, toolchain.identity, host, spec.name, src.name, text, header_hash, *keyed
    )
    obj = root / "obj" / f"{key}.o"
    obj = existing_or(builds_dir() / "obj" / f"{key}.o", obj)
    return _Variant(layout, text, command, key, obj, pch, pch_text, base, index)


def existing_or(shared: Path, own: Path) -> Path:
    """``shared`` when it exists (a read-only shared cache still serves hits), else ``own``."""
    return shared if shared.exists() else own


def _build_into(
    spec: ExtensionSpec,
    toolchain: Toolchain,
    units: list[_Unit],
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
            _write(workdir / f.name, f.text)
        objects: dict[str, Path] = {}
        todo: list[_Unit] = []
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
            outcomes = list(pool.map(lambda u: _compile_unit(u, workdir, deadline, layout), todo))
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
            result.error = _failure_message(failed, result.log)
            return
        output = workdir / f"{spec.name}.so"
        ordered = [str(objects[u.source.name]) for u in units]
        ok, log = _run(
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


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _compile_unit(
    unit: _Unit, workdir: Path, deadline: float, layout: str
) -> tuple[_Variant, bool, str]:
    """Compile the light variant; if it fails (now or before), the stock one, whose result
    (object or diagnostics) is what the candidate sees."""
    light = unit.light
    if light is not None and layout == "light":
        ok, log = _compile(light, workdir / ".light", unit.source.name, deadline)
        return light, ok, log
    if light is not None and layout == "auto":
        own = _own_failure_marker(light)
        if own.exists():
            return light, False, own.read_text(encoding="utf-8", errors="replace")
    if light is not None and layout == "auto" and not _light_failed(light):
        ok, log = _compile(light, workdir / ".light", unit.source.name, deadline)
        if ok:
            return light, True, log
        if _deterministic(log):
            if _own_failure(unit, light, log):  # stock fails alike: not compiled
                log = without_hints(log)
                with contextlib.suppress(OSError):
                    _write(own, log)
                return light, False, log
            _write(_light_failed_marker(light), log[-4000:])
    if usable(unit.stock.cached_object):
        return unit.stock, True, ""
    failure = unit.stock.cached_object.with_suffix(".failed")
    if failure.exists():
        return unit.stock, False, failure.read_text(encoding="utf-8", errors="replace")
    ok, log = _compile(unit.stock, workdir, unit.source.name, deadline)
    if not ok and _deterministic(log):
        with contextlib.suppress(OSError):
            _write(failure, log)
    return unit.stock, ok, log


def _compile(variant: _Variant, folder: Path, name: str, deadline: float) -> tuple[bool, str]:
    if folder.name == ".light":
        _write(folder / name, variant.text)
    tmp_obj = folder / ".objs" / f"{variant.key}.o"
    tmp_obj.parent.mkdir(parents=True, exist_ok=True)
    command = variant.command
    if (
        variant.pch is not None
        and variant.pch_base is not None
        and not ensure_pch(variant.pch, variant.pch_text, variant.pch_base, deadline)
    ):
        command = [*variant.pch_base, "-include", NAME_HEADER]  # same result, without the PCH
    cwd = folder.parent if folder.name == ".light" else folder
    source = f".light/{name}" if folder.name == ".light" else name
    # the compiler reads candidate sources: confined (``_run``'s docstring says why)
    if name.endswith(".cu"):
        ok, log = compile_cu(command, source, str(tmp_obj), cwd, deadline, variant.key, True)
    else:
        ok, log = _run([*command, "-c", source, "-o", str(tmp_obj)], cwd, deadline, True)
    if ok:
        os.chmod(tmp_obj, 0o644)
        os.replace(tmp_obj, variant.cached_object)
        seal(variant.cached_object)
    return ok, log


def _own_failure_marker(variant: _Variant) -> Path:
    return variant.cached_object.with_suffix(".own-failed")


def _own_failure(unit: _Unit, light: _Variant, log: str) -> bool:
    """Whether stock would fail with the same errors (``light_failure.py`` says when)."""
    if light.index is None:
        return False
    identifiers = umbrella_identifiers(light.index)
    if identifiers is None:
        return False
    return is_own_failure(log, own_labels(unit.source.body), identifiers)


def _light_failed_marker(variant: _Variant) -> Path:
    return variant.cached_object.with_suffix(".light-failed")


def _light_failed(variant: _Variant) -> bool:
    return _light_failed_marker(variant).exists()


def _deterministic(log: str) -> bool:
    """A failure that recompiling the same text would repeat (not a timeout, kill or crash)."""
    if any(mark in log for mark in ("build timed out", "Killed", "internal compiler error")):
        return False
    return any(DIAGNOSTIC.match(line) for line in log.splitlines())


def _run(
    command: list[str], cwd: Path, deadline: float, confined: bool = False
) -> tuple[bool, str]:
    """Run a compiler step. ``confined``: the step reads candidate sources, so it runs in the
    compile sandbox (``compile_sandbox.py``): it cannot read the harness's secret (an
    ``#include`` or ``.incbin`` of the key would otherwise put it into a log or a module)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False, "build timed out before this step started"
    env = None
    if confined:
        command, env = confine_compiler(command, cwd)
    with compiler_slot(deadline) as got:
        if not got:
            return False, "build timed out waiting for a free compiler slot"
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            text = out.decode("utf-8", "replace")[-MAX_LOG_CHARS:]
            return False, text + "\nbuild timed out (the compiler was killed)"
    return proc.returncode == 0, out.decode("utf-8", "replace")[-MAX_LOG_CHARS:]


def trusted(path: Path) -> bool:
    """Whether a cached file may be used: its seal checks. A sandboxed process cannot check
    (it cannot read the key) and needs not: the shared cache is read-only to every sandboxed
    process, so only the harness wrote what it finds there."""
    if not secret.available():
        return True
    if secret.sealed_digest(path) is None:
        log.warning("build cache entry %s failed its integrity check: rebuilding it", path)
        return False
    return True


def usable(path: Path) -> bool:
    """A cached file that exists and passes its integrity check."""
    return path.exists() and trusted(path)


def seal(path: Path, entry: str | None = None) -> None:
    """Sign a file the harness just put into the cache (nothing to do in a sandbox)."""
    if secret.available():
        secret.seal_file(path, entry)


def _failure_message(failed: list[str], log: str) -> str:
    head = f"compilation failed in {', '.join(failed)}"
    if "build timed out" in log:
        head = f"build timed out while compiling {', '.join(failed)}"
    return f"{head}:\n{summarise(log)}"


@contextlib.contextmanager
def locked(path: Path, deadline: float) -> Iterator[None]:
    """An exclusive file lock, waited for until ``deadline`` (then proceed without it)."""
    ensure_dir(path.parent)
    with open(path, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break  # build anyway; the final rename stays atomic
                time.sleep(0.05)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:32]


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
        units = [_plan_unit(spec, toolchain, src, root) for src in spec.translation_units]
        _plan_light(spec, toolchain, units, root, deadline)
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
