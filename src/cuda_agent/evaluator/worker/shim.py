"""The harness's ``load_inline`` / ``load``: builds through our builder and cache.

Installed over ``torch.utils.cpp_extension`` before candidate code is imported, so every call,
at import, in ``__init__`` or in ``forward``, with constant sources or sources made at run time,
gets light headers, the shared cache, the build deadline and our allowed-flags policy.
``load`` takes sources from the solution folder or the worker's private temporary folder.

A failed build raises what stock torch raises (``RuntimeError`` from a build, ``ImportError``
from a module that does not import), so candidate code behaves as it would with stock torch:
a solution may catch the error and fall back to PyTorch. The harness still knows: the first
failure's compiler diagnostics stay in ``failure``, and the exceptions carry them
(``diagnostics_of``), so the verdict names the build error whether it was caught (a fallback,
judged by the policy: ``no_custom_kernel``) or not (stage ``build``). A build that failed
before the worker started (``known_failures``) fails again at once, without a second compile.

Every extension module handed to the candidate is wrapped in ``ExtensionProxy``, which counts
calls into custom code (the policy needs to know that custom kernels actually ran).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.builder.builder import BuildResult, build_extension
from cuda_agent.evaluator.builder.inline import file_spec, inline_spec
from cuda_agent.evaluator.builder.spec import ExtensionSpec, FlagError, with_address_sanitizer
from cuda_agent.evaluator.worker import device_turn


class Diagnosed:
    """Mixed into the shim's exceptions: ``diagnostics`` is the agent-readable build error."""

    diagnostics: str = ""


class ExtensionBuildError(Diagnosed, RuntimeError):
    """An extension did not build (stock ``load_inline`` raises ``RuntimeError`` too)."""

    def __init__(self, name: str, diagnostics: str) -> None:
        super().__init__(f"Error building extension '{name}': {diagnostics}")
        self.diagnostics = diagnostics


class ExtensionImportError(Diagnosed, ImportError):
    """A built extension did not import (an undefined symbol, say)."""

    def __init__(self, diagnostics: str) -> None:
        super().__init__(diagnostics)
        self.diagnostics = diagnostics


def diagnostics_of(err: BaseException) -> str | None:
    """The build diagnostics ``err`` carries, directly or through its cause/context chain."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, Diagnosed):
            return current.diagnostics
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def failure_key(spec: ExtensionSpec) -> str:
    """A stable identity of what ``spec`` compiles (parent and worker compute the same)."""
    digest = hashlib.sha256()
    for part in (spec.name, spec.backend, *spec.cflags, "\0", *spec.cuda_cflags, "\0"):
        digest.update(part.encode() + b"\0")
    for part in (*spec.ldflags, "\0"):
        digest.update(part.encode() + b"\0")
    for f in spec.files:
        digest.update(f"{f.name}\0{len(f.text)}\0{f.text}\0".encode())
    return digest.hexdigest()


@dataclass
class ExtensionUsage:
    calls: int = 0
    by_function: dict[str, int] = field(default_factory=dict)


class ExtensionProxy(types.ModuleType):
    """A module whose callables count their calls before delegating to the real extension."""

    def __init__(self, real: types.ModuleType, usage: ExtensionUsage) -> None:
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__file__ = getattr(real, "__file__", None)
        for attr in dir(real):
            if attr.startswith("__"):
                continue
            value = getattr(real, attr)
            counted = isinstance(value, types.BuiltinFunctionType)
            setattr(self, attr, _counting(attr, value, usage) if counted else value)


def _counting(name: str, fn: Any, usage: ExtensionUsage) -> Any:
    def call(*args: Any, **kwargs: Any) -> Any:
        usage.calls += 1
        usage.by_function[name] = usage.by_function.get(name, 0) + 1
        return fn(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = getattr(fn, "__doc__", None)
    return call


class BuildShim:
    """Stateful replacement for ``load_inline`` and ``load`` for one evaluation.

    ``roots``: folders besides ``base_dir`` that ``load`` may take sources from (the worker's
    private temporary folder); ``known_failures``: ``failure_key`` -> diagnostics of builds
    that already failed in the parent; ``sanitizer`` ``"address"``: every extension is built
    with AddressSanitizer (the cpu backend's memory check,
    ``evaluator/checks/memory_safety.py``).
    """

    def __init__(
        self,
        backend: str,
        base_dir: Path,
        timeout_s: float,
        roots: Sequence[Path] = (),
        known_failures: Mapping[str, str] | None = None,
        sanitizer: str = "",
    ) -> None:
        self.backend = backend
        self.sanitizer = sanitizer
        self.base_dir = base_dir
        self.roots = tuple(roots)
        self.timeout_s = timeout_s
        self.builds: list[BuildResult] = []
        self.failure: str | None = None
        self.usage = ExtensionUsage()
        self.triton: Any = None  # the Triton launch hook (``triton_launches``), when installed
        self._module_paths: list[Path] = []
        self._failed: dict[str, str] = dict(known_failures or {})

    def load_inline(
        self, name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any
    ) -> types.ModuleType:
        positional = ("functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        kwargs.update(dict(zip(positional, args, strict=False)))
        try:
            spec = inline_spec(self.backend, name, cpp_sources, cuda_sources, **kwargs)
        except FlagError as err:
            raise self._failed_build(str(name), str(err)) from None
        return self._build_and_load(spec)

    def load(self, name: str, sources: Any, *args: Any, **kwargs: Any) -> types.ModuleType:
        positional = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        kwargs.update(dict(zip(positional, args, strict=False)))
        kwargs.pop("roots", None)
        try:
            spec = file_spec(self.backend, name, sources, self.base_dir, roots=self.roots, **kwargs)
        except FlagError as err:
            raise self._failed_build(str(name), str(err)) from None
        return self._build_and_load(spec)

    @property
    def module_paths(self) -> list[Path]:
        """Every compiled module this candidate loaded (prebuilt or built through the shim)."""
        return list(self._module_paths)

    def load_prebuilt(self, name: str, path: Path) -> types.ModuleType:
        module = _import_extension(name, path)
        self._module_paths.append(path)
        return ExtensionProxy(module, self.usage)

    def _build_and_load(self, spec: ExtensionSpec) -> types.ModuleType:
        if self.sanitizer == "address":
            spec = with_address_sanitizer(spec)
        key = failure_key(spec)
        if key in self._failed:
            raise self._failed_build(spec.name, self._failed[key])
        result = build_extension(spec, timeout_s=self.timeout_s, cached_only=True)
        if not result.ok:  # to be compiled: a shared GPU is left to others meanwhile
            with device_turn.current().compiling(_synchronize):
                result = build_extension(spec, timeout_s=self.timeout_s)
        self.builds.append(result)
        if not result.ok or result.module_path is None:
            self._failed[key] = result.error or "build failed"
            raise self._failed_build(spec.name, self._failed[key])
        try:
            module = _import_extension(spec.name, result.module_path)
        except ImportError as err:
            message = f"the built extension {spec.name} does not import: {err}"
            self.failure = self.failure or message
            raise ExtensionImportError(message) from None
        self._module_paths.append(result.module_path)
        return ExtensionProxy(module, self.usage)

    def _failed_build(self, name: str, message: str) -> ExtensionBuildError:
        self.failure = self.failure or message
        return ExtensionBuildError(name, message)

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp_extension

        cpp_extension.load_inline = self.load_inline
        cpp_extension.load = self.load


def _synchronize() -> None:
    """Wait for the candidate's queued device work (before the GPU is left to another job)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def private_temp_roots(root: Path) -> list[Path]:
    """The worker's private temporary folder (``<worker folder>/private/tmp``, the worker folder
    holding the solution folder ``root``), made this process's TMPDIR; with its other name
    (bubblewrap binds it at /tmp). ``load`` may take sources from there besides ``root``."""
    tmp = root.parent / "private" / "tmp"
    try:
        tmp.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None
    aliases = [tmp]
    try:
        if os.path.samefile("/tmp", tmp):
            aliases.append(Path("/tmp"))
    except OSError:
        pass
    return aliases


def _import_extension(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
