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
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.core import secret
from cuda_agent.core.paths import builds_dir, ensure_dir
from cuda_agent.evaluator.build.compile_sandbox import confine_compiler
from cuda_agent.evaluator.build.compiler_log import summarise
from cuda_agent.evaluator.build.pch import ensure_pch, pch_header, wants_pch
from cuda_agent.evaluator.build.spec import ExtensionSpec, SourceFile
from cuda_agent.evaluator.build.toolchain import Toolchain, ToolchainError, discover

log = logging.getLogger(__name__)

BUILDER_VERSION = "2"
PRIVATE_BUILDS_ENV = "CUDA_AGENT_PRIVATE_BUILDS"  # where to build when the cache is read-only
NAME_HEADER = ".ca_extension_name.h"
MAX_LOG_CHARS = 65536


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
        }


@dataclass
class _Unit:
    source: SourceFile
    command: list[str]
    key: str
    cached_object: Path
    pch: Path | None = None
    pch_base: list[str] | None = None


def build_extension(
    spec: ExtensionSpec, *, timeout_s: float = 600.0, jobs: int | None = None
) -> BuildResult:
    """Build ``spec`` (or fetch it from the cache). Never raises for a candidate's mistake."""
    start = time.monotonic()
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
    )
    final = root / "ext" / result.key / f"{spec.name}.so"
    shared = builds_dir() / "ext" / result.key / f"{spec.name}.so"
    if shared.exists():  # a read-only shared cache (sandboxed worker) still serves hits
        final = shared
    deadline = start + timeout_s
    if final.exists() and trusted(final):
        result.ok, result.cached, result.module_path = True, True, final
        result.objects_cached = len(units)
        result.seconds = time.monotonic() - start
        return result
    if shared.exists() and final == shared:
        final = root / "ext" / result.key / f"{spec.name}.so"  # it failed its check: rebuild
    with locked(root / "locks" / f"{result.key}.lock", deadline):
        if final.exists() and trusted(final):
            result.ok, result.cached, result.module_path = True, True, final
        else:
            if final.parent.exists():
                shutil.rmtree(final.parent, ignore_errors=True)
            _build_into(spec, toolchain, units, final, root, deadline, jobs, result)
    result.seconds = time.monotonic() - start
    return result


def _writable_root(shared: Path) -> Path:
    """The shared cache, or this process's private one when the shared cache is read-only."""
    private = os.environ.get(PRIVATE_BUILDS_ENV)
    try:
        ensure_dir(shared)
        if os.access(shared, os.W_OK):
            return shared
    except OSError:
        pass
    if private:
        return ensure_dir(Path(private))
    return ensure_dir(shared)


def _plan_unit(spec: ExtensionSpec, toolchain: Toolchain, src: SourceFile, root: Path) -> _Unit:
    """The unit's command and its cache key (which never depends on where the cache lives)."""
    pch: Path | None = None
    base: list[str] | None = None
    if src.is_cuda:
        command = toolchain.nvcc_command(spec.cuda_cflags, spec.name)
        keyed = command
    else:
        base = toolchain.cxx_command(spec.cflags)
        command = keyed = [*base, "-include", NAME_HEADER]
        if wants_pch(src.text):
            pch_key = _digest(BUILDER_VERSION, toolchain.identity, *base)
            pch = pch_header(root, pch_key)
            command = [*base, "-include", str(pch), "-include", NAME_HEADER]
            keyed = [*base, "-include", f"<pch:{pch_key}>", "-include", NAME_HEADER]
    header_hash = _digest(*(f"{h.name}\0{h.text}" for h in spec.headers))
    native = any(flag.startswith(("-march=native", "-mtune=native")) for flag in command)
    host = toolchain.host_cpu if native else ""
    key = _digest(
        BUILDER_VERSION,
        toolchain.identity,
        host,
        spec.name,
        src.name,
        src.text,
        header_hash,
        *keyed,
    )
    return _Unit(src, command, key, root / "obj" / f"{key}.o", pch, base)


def _build_into(
    spec: ExtensionSpec,
    toolchain: Toolchain,
    units: list[_Unit],
    final: Path,
    root: Path,
    deadline: float,
    jobs: int | None,
    result: BuildResult,
) -> None:
    ensure_dir(root / "obj")
    workdir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=ensure_dir(root / "tmp")))
    try:
        (workdir / NAME_HEADER).write_text(f"#define TORCH_EXTENSION_NAME {spec.name}\n")
        for f in spec.files:
            path = workdir / f.name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f.text, encoding="utf-8")
        todo = [u for u in units if not (u.cached_object.exists() and trusted(u.cached_object))]
        result.objects_cached = len(units) - len(todo)
        logs: list[str] = []
        failed: list[str] = []
        workers = max(1, min(len(todo), jobs or os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            outcomes = list(pool.map(lambda u: _compile(u, workdir, deadline), todo))
        for unit, (ok, log) in zip(todo, outcomes, strict=True):
            if log.strip():
                logs.append(f"$ compile {unit.source.name}\n{log}")
            if ok:
                result.objects_built += 1
            else:
                failed.append(unit.source.name)
        result.log = "\n".join(logs)[-MAX_LOG_CHARS:]
        if failed:
            result.error = _failure_message(failed, result.log)
            return
        output = workdir / f"{spec.name}.so"
        objects = [str(u.cached_object) for u in units]
        ok, log = _run(
            toolchain.link_command(objects, str(output), spec.ldflags), workdir, deadline
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
        final.parent.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staging, final.parent)
        except OSError:  # another process finished the same extension first
            shutil.rmtree(staging, ignore_errors=True)
        result.ok, result.module_path = True, final
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _compile(unit: _Unit, workdir: Path, deadline: float) -> tuple[bool, str]:
    tmp_obj = workdir / ".objs" / f"{unit.key}.o"
    tmp_obj.parent.mkdir(parents=True, exist_ok=True)
    command = unit.command
    if (
        unit.pch is not None
        and unit.pch_base is not None
        and not ensure_pch(unit.pch, unit.pch_base, deadline)
    ):
        command = [*unit.pch_base, "-include", NAME_HEADER]  # same result, without the PCH
    ok, log = _run(
        [*command, "-c", unit.source.name, "-o", str(tmp_obj)], workdir, deadline, confined=True
    )
    if ok:
        os.chmod(tmp_obj, 0o644)
        os.replace(tmp_obj, unit.cached_object)
        seal(unit.cached_object)
    return ok, log


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
        out, _ = proc.communicate(timeout=remaining)
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
