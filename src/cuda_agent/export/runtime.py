"""Runtime of a package made by ``cuda-agent export`` (copied into it as ``_runtime.py``).

It imports torch and the standard library only: the installed package never needs cuda_agent.
For one exported problem it

* runs the solution's source (kept verbatim as ``_solution.py``) with its extensions prebuilt
  at install time: ``load_inline(name=...)`` returns the package's compiled module of that
  name and a workdir's ``import cuda_extension`` finds the package's own, so importing
  compiles nothing (Triton kernels compile at their first launch, as they did when verified;
  a Triton workdir's ``import kernels`` finds the package's copy of its kernel modules);
* registers the whole forward as one custom operator, ``torch.ops.<namespace>.<op>``, whose
  fake (meta) implementation runs the problem's reference ``Model`` on fake tensors, so
  ``torch.compile(model, fullgraph=True)`` traces through it without a graph break; eager calls
  skip the dispatcher and run the same kernels directly;
* makes ``ModelNew``: the solution's class (same constructor arguments, same ``state_dict``
  keys as the reference), whose forward goes through the operator under ``torch.compile``;
* checks every call against the sizes the kernels were verified on (``VERIFIED["shapes"]``)
  and the GPU's compute capability: outside them, by default, an error that names the verified
  sizes, or a warning when every size tried passed (``VERIFIED["generalizes"]``); the policy is
  set by ``set_unverified_policy`` or the ``<NAMESPACE>_UNVERIFIED`` environment variable.

The kernels are inference-only: parameters reach the operator detached, and a backward through
it (an input that requires grad) raises.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import itertools
import os
import sys
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

POLICIES = ("error", "warn", "allow")
SCHEMA_TYPES = {"tensor": "Tensor", "int": "SymInt", "float": "float", "bool": "bool"}
MAX_LISTED = 8
MAX_APPROVED = 4096


class UnverifiedCallError(RuntimeError):
    """A call on sizes (or a GPU) the kernels were never verified on."""


def input_kind(facts: dict[str, Any]) -> str:
    """``tensor``, ``int``, ``float`` or ``bool`` for one verified input's description."""
    if "shape" in facts:
        return "tensor"
    value = facts.get("value")
    if isinstance(value, bool):
        return "bool"
    return "int" if isinstance(value, int) else "float"


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def frozen(value: Any) -> Any:
    """A hashable copy of a JSON-like value (lists become tuples)."""
    if isinstance(value, list | tuple):
        return tuple(frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    return value


@contextlib.contextmanager
def prebuilt_extensions(package: str, modules: dict[str, str]) -> Iterator[None]:
    """While the solution's source runs: ``load_inline``/``load`` return prebuilt modules and
    ``import cuda_extension`` finds the package's own (restored afterwards)."""
    import torch.utils.cpp_extension as cpp_extension

    def load_inline(name: str, *args: Any, **kwargs: Any) -> types.ModuleType:
        if name not in modules:
            raise ImportError(
                f"{package}: load_inline(name={name!r}) was not built when the package was "
                f"installed (built: {', '.join(sorted(modules)) or 'none'})"
            )
        return importlib.import_module(modules[name])

    def load(name: str, *args: Any, **kwargs: Any) -> types.ModuleType:
        return load_inline(name)

    saved = (cpp_extension.load_inline, cpp_extension.load, sys.modules.get("cuda_extension"))
    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
    if "cuda_extension" in modules:
        sys.modules["cuda_extension"] = importlib.import_module(modules["cuda_extension"])
    try:
        yield
    finally:
        cpp_extension.load_inline, cpp_extension.load = saved[0], saved[1]
        if saved[2] is not None:
            sys.modules["cuda_extension"] = saved[2]
        else:
            sys.modules.pop("cuda_extension", None)


@contextlib.contextmanager
def packaged_kernel_modules(package: str, folder: Path) -> Iterator[None]:
    """While the solution's source runs: ``import kernels`` (a Triton workdir's kernel modules)
    finds the package's copy; afterwards every ``kernels`` name is removed again and what was
    there before restored, so two problems' ``kernels`` never mix."""
    if not (folder / "kernels" / "__init__.py").exists():
        yield
        return

    def ours(name: str) -> bool:
        return name == "kernels" or name.startswith("kernels.")

    saved = {name: mod for name, mod in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    sys.modules["kernels"] = importlib.import_module(f"{package}.kernels")
    try:
        yield
    finally:
        for name in [name for name in sys.modules if ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def interpret_triton_on_cpu(verified: dict[str, Any]) -> None:
    """Triton kernels verified on the cpu backend ran in Triton's interpreter: so do these
    (``TRITON_INTERPRET=1``, read when a kernel is decorated, unless the caller set it)."""
    if verified.get("backend") == "cpu" and "triton" in str(verified.get("language") or ""):
        os.environ.setdefault("TRITON_INTERPRET", "1")


def load_solution_class(
    package: str,
    folder: Path,
    modules: dict[str, str],
    verified: dict[str, Any] | None = None,
) -> type[torch.nn.Module]:
    """Run ``_solution.py`` of ``folder`` with its extensions prebuilt (and a Triton workdir's
    kernel modules importable as ``kernels``); its ``ModelNew``."""
    if verified is not None:
        interpret_triton_on_cpu(verified)
    path = folder / "_solution.py"
    module = types.ModuleType(f"{package}._solution")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    with prebuilt_extensions(package, modules), packaged_kernel_modules(package, folder):
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
    cls = getattr(module, "ModelNew", None)
    if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
        raise ImportError(f"{package}: _solution.py defines no ModelNew module")
    return cls


class ExportedProblem:
    """Everything of one exported problem: its operator, its ``ModelNew``, its checks."""

    def __init__(
        self,
        *,
        package: str,
        namespace: str,
        op: str,
        solution: type[torch.nn.Module],
        reference: type[torch.nn.Module],
        verified: dict[str, Any],
    ) -> None:
        self.package, self.namespace, self.op_name = package, namespace, op
        self.solution, self.reference, self.verified = solution, reference, verified
        base = verified["shapes"][0]
        self.input_kinds = [input_kind(f) for f in base["inputs"]]
        self.output_kind = str(base["output"]["kind"])
        self._signature = inspect.signature(solution)
        self._verified_keys = {
            self._key(self._init_key(tuple(s["init_args"]), {}), s["inputs"])
            for s in verified["shapes"]
            if s["verdict"] == "pass"
        }
        self._models: dict[int, weakref.ref[torch.nn.Module]] = {}
        self._references: dict[int, tuple[torch.nn.Module, set[str]]] = {}
        self._init_keys: dict[int, Any] = {}
        self._state_names: dict[int, list[str]] = {}
        self._handles = itertools.count(1)
        self._warned: set[Any] = set()
        self._capabilities: dict[int, str] = {}
        self._approved: set[Any] = set()  # ``_call_signature``s of calls found verified
        default = "warn" if verified.get("generalizes") else "error"
        env = f"{namespace.upper()}_UNVERIFIED"
        self.policy = os.environ.get(env, default)
        if self.policy not in POLICIES:
            raise ValueError(f"{env}={self.policy!r}: choose from {', '.join(POLICIES)}")
        self.library = torch.library.Library(namespace, "FRAGMENT")
        self.op = self._define_op()
        self.model_class = self._model_class()

    def set_policy(self, policy: str) -> None:
        """``error`` (raise), ``warn`` (warn once per new size) or ``allow`` (silent)."""
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}: choose from {', '.join(POLICIES)}")
        self.policy = policy

    # -- the operator ------------------------------------------------------------------------

    def _define_op(self) -> Any:
        names = [f"{SCHEMA_TYPES[kind]} a{i}" for i, kind in enumerate(self.input_kinds)]
        schema = f"{self.op_name}(int handle, Tensor[] state, {', '.join(names)}) -> Tensor[]"
        self.library.define(schema)
        qualname = f"{self.namespace}::{self.op_name}"
        self.library.impl(self.op_name, self._real, "CompositeExplicitAutograd")
        torch.library.register_fake(qualname, self._fake, lib=self.library)
        torch.library.register_autograd(
            qualname, self._no_backward, setup_context=_no_context, lib=self.library
        )
        return getattr(getattr(torch.ops, self.namespace), self.op_name).default

    def _real(self, handle: int, state: list[torch.Tensor], *args: Any) -> list[torch.Tensor]:
        model = self._model(handle)
        self.check(model, args)
        outputs = _flat(self.solution.forward(model, *args))
        seen = {t.untyped_storage().data_ptr() for t in (*state, *_tensors(args)) if t.numel()}
        unique: list[torch.Tensor] = []
        for out in outputs:  # an operator's outputs may alias neither its inputs nor each other
            ptr = out.untyped_storage().data_ptr()
            unique.append(out.clone() if out.numel() and ptr in seen else out)
            seen.add(ptr)
        return unique

    def _fake(self, handle: int, state: list[torch.Tensor], *args: Any) -> list[torch.Tensor]:
        reference, names = self._references[handle]
        tensors = {
            name: t
            for name, t in zip(self._state_names[handle], state, strict=True)
            if name in names
        }
        return _flat(torch.func.functional_call(reference, tensors, args))

    def _no_backward(self, ctx: Any, *grads: Any) -> Any:
        raise RuntimeError(
            f"{self.namespace}.{self.op_name}: the exported kernels are inference-only "
            "(no backward); run them under torch.no_grad() or on inputs that do not require grad"
        )

    # -- the model class ---------------------------------------------------------------------

    def _model_class(self) -> type:
        exported, op, single = self, self.op, self.output_kind == "tensor"
        sequence: Callable[[list[torch.Tensor]], Any] = (
            list if self.output_kind == "list" else tuple
        )

        class ModelNew(self.solution):  # type: ignore[name-defined]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                exported.register(self, args, kwargs)

            def __setstate__(self, state: dict[str, Any]) -> None:  # copy.deepcopy, pickle
                super().__setstate__(state)
                exported.register(self, *self._ca_init)  # a copy gets its own handle

            def forward(self, *args: Any) -> Any:
                if not torch.compiler.is_compiling():
                    return exported.run_eager(self, args)
                params = itertools.chain(self.parameters(), self.buffers())
                outs = op(self._ca_handle, [t.detach() for t in params], *args)
                return outs[0] if single else sequence(outs)

        ModelNew.__module__ = self.package
        ModelNew.__qualname__ = ModelNew.__name__ = "ModelNew"
        ModelNew.__doc__ = (
            f"The verified kernels of problem {self.verified['problem']['id']} as a module "
            f"(same constructor and state_dict as its Model); see {self.package}.VERIFIED."
        )
        return ModelNew

    def register(
        self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        handle = next(self._handles)
        model.__dict__["_ca_handle"] = handle  # a plain int attribute: constant under compile
        model.__dict__["_ca_init"] = (args, kwargs)
        self._models[handle] = weakref.ref(model)
        self._init_keys[handle] = self._init_key(args, kwargs)
        self._state_names[handle] = [
            *(n for n, _ in model.named_parameters()),
            *(n for n, _ in model.named_buffers()),
        ]
        with torch.device("meta"):
            reference = self.reference(*args, **kwargs).eval()
        names = {n for n, _ in (*reference.named_parameters(), *reference.named_buffers())}
        self._references[handle] = (reference, names)
        weakref.finalize(model, self._forget, handle)

    def _forget(self, handle: int) -> None:
        for table in (self._models, self._references, self._init_keys, self._state_names):
            table.pop(handle, None)

    def _model(self, handle: int) -> torch.nn.Module:
        ref = self._models.get(handle)
        model = ref() if ref is not None else None
        if model is None:
            raise RuntimeError(f"{self.package}: the model of this call no longer exists")
        return model

    def run_eager(self, model: torch.nn.Module, args: tuple[Any, ...]) -> Any:
        self.check(model, args)
        return self.solution.forward(model, *args)

    # -- the verified sizes ------------------------------------------------------------------

    def check(self, model: torch.nn.Module, args: tuple[Any, ...]) -> None:
        """Apply the policy to a call outside the verified sizes or on another GPU."""
        handle = getattr(model, "_ca_handle", 0)
        fast = _call_signature(handle, args)  # a call like one already found verified: done
        if fast is not None and fast in self._approved:
            return
        key = self._key(self._init_keys.get(handle), _describe(args))
        problems = []
        if key not in self._verified_keys:
            problems.append(f"this call ({_format_call(key)}) was never verified")
        capability = self._capability(args)
        if capability is not None:
            problems.append(capability)
        if not problems:
            if fast is not None and len(self._approved) < MAX_APPROVED:
                self._approved.add(fast)
            return
        if self.policy == "allow":
            return
        message = (
            f"{self.package}: {'; '.join(problems)}. Verified: {self._verified_text()}. "
            f"To run anyway: {self.package}.set_unverified_policy('allow') or "
            f"{self.namespace.upper()}_UNVERIFIED=allow"
        )
        if self.policy == "error":
            raise UnverifiedCallError(message)
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, stacklevel=3)

    def _capability(self, args: tuple[Any, ...]) -> str | None:
        if self.verified.get("backend") != "cuda":
            return None
        expected = str(self.verified.get("device", {}).get("capability", ""))
        for t in _tensors(args):
            if t.device.type != "cuda":
                continue
            index = t.device.index if t.device.index is not None else torch.cuda.current_device()
            if index not in self._capabilities:
                major, minor = torch.cuda.get_device_capability(index)
                self._capabilities[index] = f"{major}.{minor}"
            if self._capabilities[index] != expected:
                name = torch.cuda.get_device_name(index)
                gpu = self.verified["device"].get("device", "?")
                return (
                    f"this GPU ({name}) has compute capability {self._capabilities[index]}, "
                    f"the kernels were verified on {gpu} (compute capability {expected})"
                )
            return None
        return None

    def _init_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            bound = self._signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values: Any = [*bound.args, *sorted(bound.kwargs.items())]
        except TypeError:
            values = [*args, *sorted(kwargs.items())]
        return frozen([v for v in values if isinstance(v, int | float | bool | list | tuple)])

    @staticmethod
    def _key(init_key: Any, inputs: list[dict[str, Any]]) -> Any:
        return (init_key, frozen(inputs))

    def _verified_text(self) -> str:
        shapes = self.verified["shapes"]
        passed = [s for s in shapes if s["verdict"] == "pass"]
        texts = [f"{_sizes_text(s)} ({_inputs_text(s['inputs'])})" for s in passed[:MAX_LISTED]]
        if len(passed) > MAX_LISTED:
            texts.append(f"and {len(passed) - MAX_LISTED} more")
        failed = [s["label"] for s in shapes if s["verdict"] == "fail"]
        device = self.verified.get("device", {})
        where = device.get("device", "?")
        if device.get("capability"):
            where += f", compute capability {device['capability']}"
        text = f"{'; '.join(texts)} on {where}"
        if failed:
            text += f"; failed at {', '.join(failed)}"
        return text


def _no_context(ctx: Any, inputs: Any, output: Any) -> None:
    return None


def _flat(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, list | tuple) and all(isinstance(t, torch.Tensor) for t in output):
        return list(output)
    raise TypeError(f"ModelNew.forward returned {type(output).__name__}, not tensors")


def _tensors(args: tuple[Any, ...]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def _call_signature(handle: int, args: tuple[Any, ...]) -> Any:
    """A cheap hashable summary of a call (model, sizes, dtypes, devices, scalar values), or
    None when an argument has no such summary. Equal summaries get the same verdict."""
    parts: list[Any] = [handle]
    for a in args:
        if isinstance(a, torch.Tensor):
            parts.append((tuple(a.shape), a.dtype, a.device))
        elif isinstance(a, bool | int | float):
            parts.append((type(a), a))
        else:
            return None
    return tuple(parts)


def _describe(args: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [
        {"shape": list(a.shape), "dtype": dtype_name(a.dtype)}
        if isinstance(a, torch.Tensor)
        else {"value": a}
        for a in args
    ]


def _inputs_text(inputs: list[dict[str, Any]]) -> str:
    parts = []
    for facts in inputs:
        if "shape" in facts:
            parts.append(f"{tuple(facts['shape'])} {facts['dtype']}")
        else:
            parts.append(repr(facts.get("value")))
    return ", ".join(parts)


def _format_call(key: Any) -> str:
    init_key, inputs = key
    described = [dict(item) for item in inputs]
    for facts in described:
        if "shape" in facts:
            facts["shape"] = list(facts["shape"])
    init = ", ".join(repr(v) for v in init_key) if init_key else ""
    return f"inputs {_inputs_text(described)}; constructed with ({init})"


def _sizes_text(shape: dict[str, Any]) -> str:
    sizes = shape.get("sizes") or {}
    return ", ".join(f"{k}={v}" for k, v in sizes.items()) or shape.get("label", "?")
