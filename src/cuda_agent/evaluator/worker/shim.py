"""The harness's ``load_inline`` / ``load``: builds through our builder and cache.

Installed over ``torch.utils.cpp_extension`` before candidate code is imported, so a
KernelBench single file that calls ``load_inline`` gets light headers, the shared cache and
our allowed-flags policy. A failed build raises ``CandidateBuildFailed``, which derives from
``BaseException`` so that ``except Exception:`` fallbacks in candidate code do not swallow it;
the failure is also recorded, so even a bare ``except:`` cannot hide it.

Every extension module handed to the candidate is wrapped in ``ExtensionProxy``, which counts
calls into custom code (the policy needs to know that custom kernels actually ran).
"""

from __future__ import annotations

import importlib.util
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_agent.evaluator.build.builder import BuildResult, build_extension
from cuda_agent.evaluator.build.inline import file_spec, inline_spec
from cuda_agent.evaluator.build.spec import ExtensionSpec, FlagError


class CandidateBuildFailed(BaseException):
    """A candidate's extension did not build; carries the agent-readable reason."""


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
    """Stateful replacement for ``load_inline`` and ``load`` for one evaluation."""

    def __init__(self, backend: str, base_dir: Path, timeout_s: float) -> None:
        self.backend = backend
        self.base_dir = base_dir
        self.timeout_s = timeout_s
        self.builds: list[BuildResult] = []
        self.failure: str | None = None
        self.usage = ExtensionUsage()
        self._module_paths: list[Path] = []

    def load_inline(
        self, name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any
    ) -> types.ModuleType:
        positional = ("functions", "extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        kwargs.update(dict(zip(positional, args, strict=False)))
        try:
            spec = inline_spec(self.backend, name, cpp_sources, cuda_sources, **kwargs)
        except FlagError as err:
            self._fail(str(err))
        return self._build_and_load(spec)

    def load(self, name: str, sources: Any, *args: Any, **kwargs: Any) -> types.ModuleType:
        positional = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
        kwargs.update(dict(zip(positional, args, strict=False)))
        try:
            spec = file_spec(self.backend, name, sources, self.base_dir, **kwargs)
        except FlagError as err:
            self._fail(str(err))
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
        result = build_extension(spec, timeout_s=self.timeout_s)
        self.builds.append(result)
        if not result.ok or result.module_path is None:
            self._fail(result.error or "build failed")
        assert result.module_path is not None
        try:
            module = _import_extension(spec.name, result.module_path)
        except ImportError as err:
            self._fail(f"the built extension {spec.name} does not import: {err}")
        self._module_paths.append(result.module_path)
        return ExtensionProxy(module, self.usage)

    def _fail(self, message: str) -> Any:
        self.failure = self.failure or message
        raise CandidateBuildFailed(message)

    def install(self) -> None:
        import torch.utils.cpp_extension as cpp_extension

        cpp_extension.load_inline = self.load_inline
        cpp_extension.load = self.load


def _import_extension(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
