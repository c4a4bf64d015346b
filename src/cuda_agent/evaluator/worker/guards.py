"""Integrity guards around candidate code: global state, harness functions, ATen op policy.

* ``GlobalState`` snapshots process-wide switches that change numerics or timing (TF32,
  matmul precision, cuDNN flags, deterministic mode, default dtype, thread count, grad mode).
  A candidate that flips one is flagged, and the snapshot is restored before the reference runs;
  switches a policy tolerates (``cudnn_benchmark`` under ``kernelbench``) are restored and
  remembered in ``tolerated_seen`` instead.
* ``FunctionIdentities`` remembers the objects behind functions the harness depends on; if
  candidate code rebinds one (``torch.allclose = ...``), it is flagged.
* ``OpRecorder`` is a ``TorchDispatchMode``: it sees every ATen op the candidate issues, from
  Python or from C++ through the dispatcher; ``forbidden_ops`` names those the op rule forbids.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

CREATION_OPS = frozenset(
    {
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "new_zeros",
        "zero_",
        "fill_",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        "resize_",
    }
)
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "as_strided",
        "t",
        "transpose",
        "permute",
        "unsqueeze",
        "squeeze",
        "expand",
        "slice",
        "select",
        "narrow",
        "detach",
        "alias",
        "view_as",
        "unflatten",
        "flatten",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "movedim",
        "contiguous",
        "_local_scalar_dense",
        "size",
        "stride",
        "numel",
        "dim",
        "is_contiguous",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "item",
    }
)
LIBRARY_OPS = frozenset(
    {  # vendor GEMM / convolution, allowed under `strict` as in the paper
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "matmul",
        "convolution",
        "_convolution",
        "cudnn_convolution",
        "cudnn_convolution_transpose",
        "convolution_overrideable",
        "mkldnn_convolution",
        "_slow_conv2d_forward",
        "slow_conv3d_forward",
        "slow_conv_transpose2d",
        "slow_conv_transpose3d",
    }
)
TORCH_NAMESPACES = frozenset(
    {
        "aten",
        "prims",
        "_prims",
        "quantized",
        "_quantized",
        "mkldnn",
        "c10d",
        "_c10d_functional",
        "torchvision",
        "inductor",
        "profiler",
        "_inductor_test",
        "fbgemm",
        "cudnn",
    }
)


class GlobalState:
    """Snapshot of process-wide numeric/timing switches; ``tolerated`` names the switches the
    candidate may change (they are restored by ``changed()`` and listed in ``tolerated_seen``)."""

    def __init__(self, tolerated: frozenset[str] = frozenset()) -> None:
        self.values = self.read()
        self.tolerated = tolerated
        self.tolerated_seen: set[str] = set()

    @staticmethod
    def read() -> dict[str, Any]:
        state: dict[str, Any] = {
            "default_dtype": str(torch.get_default_dtype()),
            "matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "num_threads": torch.get_num_threads(),
            "grad_enabled": torch.is_grad_enabled(),
            "cuda_matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cuda_fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "cuda_bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "cudnn_enabled": torch.backends.cudnn.enabled,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "compile_disabled": _dynamo_disabled(),
        }
        return state

    def changed(self) -> list[str]:
        """The switches that differ from the snapshot, less the tolerated ones (restored)."""
        now = self.read()
        differing = sorted(k for k, v in self.values.items() if now.get(k) != v)
        allowed = [k for k in differing if k in self.tolerated]
        if allowed:
            self.tolerated_seen.update(allowed)
            self.restore()  # the others are unchanged or about to be flagged and restored
        return [k for k in differing if k not in self.tolerated]

    def restore(self) -> None:
        """Set back each switch that differs from the snapshot, and only those.

        A switch that did not change is not set again: ``torch.set_num_threads`` starts
        threads when called (``num_threads - 1`` on a fresh process, 15 on a 16-core host),
        which the next thread count would blame on the candidate.
        """
        now = self.read()
        for name, value in self.values.items():
            if now.get(name) != value:
                _SETTERS[name](value)


_SETTERS: dict[str, Callable[[Any], object]] = {
    "default_dtype": lambda v: torch.set_default_dtype(getattr(torch, v.replace("torch.", ""))),
    "matmul_precision": torch.set_float32_matmul_precision,
    "deterministic": torch.use_deterministic_algorithms,
    "num_threads": torch.set_num_threads,
    "grad_enabled": lambda v: torch.set_grad_enabled(v),
    "cuda_matmul_tf32": lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v),
    "cuda_fp16_reduced": lambda v: setattr(
        torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", v
    ),
    "cuda_bf16_reduced": lambda v: setattr(
        torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", v
    ),
    "cudnn_enabled": lambda v: setattr(torch.backends.cudnn, "enabled", v),
    "cudnn_tf32": lambda v: setattr(torch.backends.cudnn, "allow_tf32", v),
    "cudnn_benchmark": lambda v: setattr(torch.backends.cudnn, "benchmark", v),
    "cudnn_deterministic": lambda v: setattr(torch.backends.cudnn, "deterministic", v),
    "compile_disabled": lambda v: set_compile_disabled(v),
}


def _dynamo_disabled() -> bool:
    import torch._dynamo

    return bool(torch._dynamo.config.disable)


def set_compile_disabled(disabled: bool) -> None:
    """Under ``strict``, ``torch.compile`` inside ModelNew runs eagerly: its work then shows up
    as ATen ops the policy judges, instead of hiding in generated kernels."""
    import torch._dynamo

    torch._dynamo.config.disable = disabled


_WATCHED = (
    (torch, "allclose"),
    (torch, "isclose"),
    (torch, "equal"),
    (torch, "sum"),
    (torch, "abs"),
    (torch, "isnan"),
    (torch, "isinf"),
    (torch, "where"),
    (torch, "manual_seed"),
    (torch.Tensor, "clone"),
    (torch.Tensor, "to"),
    (torch.Tensor, "__sub__"),
    (torch.Tensor, "__eq__"),
    (torch.Tensor, "__ne__"),
    (torch.Tensor, "item"),
    (torch.nn.Module, "__call__"),
    (torch.nn.Module, "load_state_dict"),
    (torch.cuda, "synchronize"),
    (torch.cuda.Event, "record"),
    (torch.cuda.Event, "elapsed_time"),
    (torch.cuda.Event, "synchronize"),
    (torch.testing, "assert_close"),
    (time, "perf_counter"),
    (time, "perf_counter_ns"),
    (time, "monotonic"),
    (time, "time"),
)


class FunctionIdentities:
    """Remembers ``id()`` of functions the harness relies on; reports any that were rebound."""

    def __init__(self, extra: tuple[tuple[Any, str], ...] = ()) -> None:
        self.watched = (*_WATCHED, *extra)
        self.ids = {self._label(o, n): id(getattr(o, n, None)) for o, n in self.watched}

    def changed(self) -> list[str]:
        return sorted(
            label
            for (o, n), (label, ident) in zip(self.watched, self.ids.items(), strict=True)
            if id(getattr(o, n, None)) != ident
        )

    @staticmethod
    def _label(owner: Any, name: str) -> str:
        return f"{getattr(owner, '__name__', type(owner).__name__)}.{name}"


class OpRecorder(TorchDispatchMode):
    """Counts ATen ops (by base name) issued while active, from Python or C++."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        schema = func._schema
        namespace, _, name = schema.name.partition("::")
        self.ops[name if namespace == "aten" else schema.name] += 1
        return func(*args, **(kwargs or {}))


def prime_recorder() -> None:
    """Use the recorder once: its first use imports torch._dynamo, which rebinds some torch
    functions (``torch.manual_seed``...). Doing it before snapshots keeps them stable."""
    with OpRecorder():
        torch.zeros(1).add_(1)


def forbidden_ops(ops: Counter[str]) -> list[str]:
    """The ATen ops of ``ops`` that the op rule does not allow in a candidate's forward (the
    caller applies the rule where the policy has it, ``PolicyRules.op_policy``)."""
    allowed = CREATION_OPS | VIEW_OPS | LIBRARY_OPS
    bad = []
    for op in ops:
        namespace, sep, _ = op.partition("::")
        if sep and namespace not in TORCH_NAMESPACES:
            continue  # the candidate's own custom op (TORCH_LIBRARY)
        if op in allowed or op.rstrip("_") in allowed:
            continue
        bad.append(op)
    return sorted(bad)
