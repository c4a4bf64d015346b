"""The translation units of one build: how each can be compiled, and compiling it.

A unit has a stock variant (the source as written) and, where the light layout applies, a
light one (the source with the light prelude and its precompiled header); each variant has
its command line, its cache key and its object's place in the shared object cache.
``compile_unit`` compiles the variant a layout asks for (falling back from light to stock
under ``auto`` when the light text fails for a reason that is not the source's own) and
stores the object.

What it does not do: link, decide the extension's cache key, or take the build's lock
(``builder.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.core.paths import builds_dir
from cuda_agent.evaluator.builder.cache_entry import seal, usable
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
from cuda_agent.evaluator.builder.pch import PRELUDE, ensure_pch, gch_of, pch_header, wants_pch
from cuda_agent.evaluator.builder.spec import ExtensionSpec, SourceFile
from cuda_agent.evaluator.builder.toolchain import Toolchain

BUILDER_VERSION = "5"
NAME_HEADER = ".ca_extension_name.h"
MAX_LOG_CHARS = 65536


def write_source(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def existing_or(shared: Path, own: Path) -> Path:
    """``shared`` when it exists (a read-only shared cache still serves hits), else ``own``."""
    return shared if shared.exists() else own


@dataclass
class Variant:
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
class Unit:
    source: SourceFile
    stock: Variant
    light: Variant | None = None

    @property
    def key(self) -> str:
        return self.stock.key

    def ready(self, layout: str = "auto") -> Variant | None:
        """The variant whose object is already cached, if any (light first)."""
        light = self.light
        if light is not None and layout == "light":
            return light if usable(light.cached_object) else None
        if light is not None and layout == "auto" and not light_failed(light):
            if usable(light.cached_object):
                return light
        elif usable(self.stock.cached_object):
            return self.stock
        return None


def plan_unit(spec: ExtensionSpec, toolchain: Toolchain, src: SourceFile, root: Path) -> Unit:
    """The unit's stock variant; its key identifies the unit (and, with the others, the
    extension), whichever layout ends up compiling it."""
    stock_pch = ""
    if not src.is_cuda and src.body_offset is not None:
        stock_pch = src.prelude  # stock's own prelude (torch/extension.h), precompiled
    elif not src.is_cuda and wants_pch(src.text):
        stock_pch = PRELUDE
    stock = _variant(spec, toolchain, src, src.text, root, stock_pch, None)
    return Unit(src, stock)


def plan_light(
    spec: ExtensionSpec, toolchain: Toolchain, units: list[Unit], root: Path, deadline: float
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
) -> Variant:
    header_hash = digest(*(f"{h.name}\0{h.text}" for h in spec.headers))
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
            pch_key = digest(BUILDER_VERSION, toolchain.identity, pch_text, *keyed_base)
            shared = pch_header(builds_dir(), pch_key)
            built = gch_of(shared).exists()
            pch = shared if built else pch_header(root, pch_key)
            command = [*base, "-include", str(pch), "-include", NAME_HEADER]
            keyed = [*keyed_base, "-include", f"<pch:{pch_key}>", "-include", NAME_HEADER]
    native = any(flag.startswith(("-march=native", "-mtune=native")) for flag in command)
    host = toolchain.host_cpu if native else ""
    key = digest(
        BUILDER_VERSION, toolchain.identity, host, spec.name, src.name, text, header_hash, *keyed
    )
    obj = root / "obj" / f"{key}.o"
    obj = existing_or(builds_dir() / "obj" / f"{key}.o", obj)
    return Variant(layout, text, command, key, obj, pch, pch_text, base, index)


def compile_unit(
    unit: Unit, workdir: Path, deadline: float, layout: str
) -> tuple[Variant, bool, str]:
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
    if light is not None and layout == "auto" and not light_failed(light):
        ok, log = _compile(light, workdir / ".light", unit.source.name, deadline)
        if ok:
            return light, True, log
        if _deterministic(log):
            if _own_failure(unit, light, log):  # stock fails alike: not compiled
                log = without_hints(log)
                with contextlib.suppress(OSError):
                    write_source(own, log)
                return light, False, log
            write_source(_light_failed_marker(light), log[-4000:])
    if usable(unit.stock.cached_object):
        return unit.stock, True, ""
    failure = unit.stock.cached_object.with_suffix(".failed")
    if failure.exists():
        return unit.stock, False, failure.read_text(encoding="utf-8", errors="replace")
    ok, log = True, ""
    if light is not None:  # the light text failed: stock's errors first, without its PCH
        ok, log = _stock_syntax(unit.stock, workdir, unit.source.name, deadline)
    if ok:
        ok, log = _compile(unit.stock, workdir, unit.source.name, deadline)
    if not ok and _deterministic(log):
        with contextlib.suppress(OSError):
            write_source(failure, log)
    return unit.stock, ok, log


def _stock_syntax(variant: Variant, folder: Path, name: str, deadline: float) -> tuple[bool, str]:
    """``g++ -fsyntax-only`` of the stock text, without the precompiled header, where that
    header is not built yet: a light text that failed almost always fails under stock too
    (``light_failure.py``), and its errors then come in about 18 s instead of building
    ``torch/extension.h``'s header first (0.75 GB, about 30 s) for one failing compile. The
    same compiler, flags and text as the compile it precedes, so the same errors; when it
    passes, the unit compiles as before (header built, object stored)."""
    pch = variant.pch
    if pch is None or variant.pch_base is None or gch_of(pch).exists():
        return True, ""
    command = [*variant.pch_base, "-include", NAME_HEADER, "-fsyntax-only", name]
    return run_compiler(command, folder, deadline, True)


def _compile(variant: Variant, folder: Path, name: str, deadline: float) -> tuple[bool, str]:
    if folder.name == ".light":
        write_source(folder / name, variant.text)
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
    # the compiler reads candidate sources: confined (``run_compiler``'s docstring says why)
    if name.endswith(".cu"):
        ok, log = compile_cu(command, source, str(tmp_obj), cwd, deadline, variant.key, True)
    else:
        ok, log = run_compiler([*command, "-c", source, "-o", str(tmp_obj)], cwd, deadline, True)
    if ok:
        os.chmod(tmp_obj, 0o644)
        os.replace(tmp_obj, variant.cached_object)
        seal(variant.cached_object)
    return ok, log


def _own_failure_marker(variant: Variant) -> Path:
    return variant.cached_object.with_suffix(".own-failed")


def _own_failure(unit: Unit, light: Variant, log: str) -> bool:
    """Whether stock would fail with the same errors (``light_failure.py`` says when)."""
    if light.index is None:
        return False
    identifiers = umbrella_identifiers(light.index)
    if identifiers is None:
        return False
    return is_own_failure(log, own_labels(unit.source.body), identifiers)


def _light_failed_marker(variant: Variant) -> Path:
    return variant.cached_object.with_suffix(".light-failed")


def light_failed(variant: Variant) -> bool:
    return _light_failed_marker(variant).exists()


def _deterministic(log: str) -> bool:
    """A failure that recompiling the same text would repeat (not a timeout, kill or crash)."""
    if any(mark in log for mark in ("build timed out", "Killed", "internal compiler error")):
        return False
    return any(DIAGNOSTIC.match(line) for line in log.splitlines())


def run_compiler(
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


def failure_message(failed: list[str], log: str) -> str:
    head = f"compilation failed in {', '.join(failed)}"
    if "build timed out" in log:
        head = f"build timed out while compiling {', '.join(failed)}"
    return f"{head}:\n{summarise(log)}"


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()[:32]
