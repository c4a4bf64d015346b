"""The operator catalogue, crawled from the installed torch (and transformers, when present).

Module operators: every ``torch.nn`` module class that is not a container, a loss, lazy,
recurrent, stochastic, or needing integer or several inputs is *probed*: constructor arguments
are derived from the input shape by the names of the parameters (``in_features`` <- the last
dimension, ``num_features`` / ``in_channels`` <- dimension 1, ``normalized_shape`` <- the last
dimension...), and the module is run on ``meta`` tensors of ranks 2 to 5. What runs is kept,
with the ranks it accepts; shapes are inferred exactly by running on ``meta`` tensors, at no
cost. Functional operators: the unary functions of ``torch.nn.functional`` and ``torch`` that
map a tensor to a tensor (activations, elementwise maths) and a few reductions along the last
dimension, probed the same way. Stochastic operators are excluded by name and by a determinism
probe on a small CPU tensor.

Transformers blocks (norms, MLPs, attention) enter only as standalone problems, as in the
paper; ``transformers_blocks`` lists the ones the installed transformers can build.
"""

from __future__ import annotations

import functools
import inspect
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

EXCLUDED = re.compile(
    r"(Loss|Dropout|^Lazy|Container|^Module|Sequential|Parameter|DataParallel|SyncBatchNorm|"
    r"^RNN|^GRU|^LSTM|Transformer|MultiheadAttention|AdaptiveLogSoftmax|Embedding|Unpool|"
    r"^Fold$|^Unfold$|Fractional|RReLU|Bilinear$|CosineSimilarity|PairwiseDistance|Identity|"
    r"Flatten|Unflatten|CrossMapLRN2d|Upsampling|ChannelShuffle)"
)
PROBE_SHAPES = {2: (8, 32), 3: (4, 16, 24), 4: (2, 16, 12, 12), 5: (2, 8, 6, 6, 6)}
UNARY_FUNCTIONAL = (
    "relu",
    "relu6",
    "elu",
    "selu",
    "celu",
    "gelu",
    "silu",
    "mish",
    "leaky_relu",
    "hardtanh",
    "hardswish",
    "hardsigmoid",
    "logsigmoid",
    "softplus",
    "softsign",
    "tanhshrink",
    "softshrink",
    "hardshrink",
    "sigmoid",
    "tanh",
)
UNARY_TORCH = (
    "exp",
    "abs",
    "sin",
    "cos",
    "square",
    "sqrt",
    "rsqrt",
    "log1p",
    "erf",
    "neg",
    "reciprocal",
    "clamp",
)
LAST_DIM_TORCH = (
    "sum",
    "mean",
    "amax",
    "amin",
    "logsumexp",
    "softmax",
    "log_softmax",
    "cumsum",
    "norm",
)
POSITIVE_INPUT = {"sqrt", "rsqrt", "log1p", "reciprocal"}  # applied to abs(x) + 1


@dataclass(frozen=True)
class OpSpec:
    """One catalogue entry. ``make`` builds it for an input shape; ``code`` writes it."""

    name: str
    kind: str  # "module" or "function"
    ranks: tuple[int, ...]
    has_params: bool = False
    changes_shape: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    def module_args(self, shape: tuple[int, ...], width: int) -> dict[str, Any]:
        return constructor_args(getattr(nn, self.name), shape, width)


def constructor_args(cls: type, shape: tuple[int, ...], width: int) -> dict[str, Any]:
    """Arguments for ``cls`` from the parameter names and the input shape."""
    args: dict[str, Any] = {}
    signature = inspect.signature(cls)
    channels = shape[1] if len(shape) > 1 else shape[-1]
    for name, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        value = _guess(name, shape, channels, width)
        if value is not None:
            args[name] = value
        elif param.default is inspect.Parameter.empty:
            raise ValueError(f"no value for {cls.__name__}({name})")
    return args


def _guess(name: str, shape: tuple[int, ...], channels: int, width: int) -> Any:
    table: dict[str, Any] = {
        "in_features": shape[-1],
        "out_features": width,
        "num_features": channels,
        "in_channels": channels,
        "out_channels": width,
        "num_channels": channels,
        "normalized_shape": shape[-1],
        "kernel_size": 3,
        "upscale_factor": 2,
        "downscale_factor": 2,
        "num_groups": _divisor(channels),
        "padding": 1,
        "size": 2,
        "output_size": 2,
        "scale_factor": 2.0,
        "dim": -1,
        "norm_type": 2.0,
    }
    return table.get(name)


def _divisor(channels: int) -> int:
    return next((g for g in (4, 2) if channels % g == 0), 1)


@functools.lru_cache(maxsize=1)
def torch_catalogue() -> tuple[OpSpec, ...]:
    with warnings.catch_warnings():  # probing odd shapes makes some modules warn
        warnings.simplefilter("ignore")
        return _crawl_torch()


def _crawl_torch() -> tuple[OpSpec, ...]:
    specs: list[OpSpec] = []
    for name in sorted(dir(nn)):
        cls = getattr(nn, name)
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or EXCLUDED.search(name):
            continue
        ranks, params, shapes = [], False, False
        for rank, shape in PROBE_SHAPES.items():
            try:
                with torch.device("meta"):
                    module = cls(**constructor_args(cls, shape, 24))
                    out = module(torch.empty(shape))
            except Exception:  # this rank (or this module) does not work: skip it
                continue
            if not isinstance(out, torch.Tensor) or out.numel() == 0:
                continue
            ranks.append(rank)
            params = params or any(True for _ in module.parameters())
            shapes = shapes or tuple(out.shape) != shape
        if ranks:
            specs.append(OpSpec(name, "module", tuple(ranks), params, shapes))
    for name in (*UNARY_FUNCTIONAL, *UNARY_TORCH, *LAST_DIM_TORCH):
        fn = function_for(name)
        if fn is None:
            continue
        ranks = []
        for rank, shape in PROBE_SHAPES.items():
            try:
                out = fn(torch.empty(shape, device="meta"))
            except Exception:
                continue
            if isinstance(out, torch.Tensor):
                ranks.append(rank)
        if ranks:
            specs.append(
                OpSpec(
                    name,
                    "function",
                    tuple(ranks),
                    changes_shape=name in ("sum", "mean", "amax", "amin", "logsumexp", "norm"),
                )
            )
    return tuple(s for s in specs if _deterministic(s))


def function_for(name: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The callable a function op applies (with its fixed extra arguments)."""
    if name in LAST_DIM_TORCH:
        reduce = getattr(torch, name, None)
        if reduce is None:
            return None

        def along_last(x: torch.Tensor) -> torch.Tensor:
            return reduce(x, dim=-1)

        return along_last
    if name == "clamp":
        return _clamp
    if name in POSITIVE_INPUT:
        positive = getattr(torch, name)

        def on_positive(x: torch.Tensor) -> torch.Tensor:
            return positive(torch.abs(x) + 1.0)

        return on_positive
    target = getattr(torch.nn.functional, name, None) or getattr(torch, name, None)
    return target if callable(target) else None


def _clamp(x: torch.Tensor) -> torch.Tensor:
    return torch.clamp(x, -1.0, 1.0)


def function_code(name: str, arg: str) -> str:
    """Source text that applies function op ``name`` to the expression ``arg``."""
    if name in LAST_DIM_TORCH:
        return f"torch.{name}({arg}, dim=-1)"
    if name == "clamp":
        return f"torch.clamp({arg}, -1.0, 1.0)"
    if name in POSITIVE_INPUT:
        return f"torch.{name}(torch.abs({arg}) + 1.0)"
    if hasattr(torch.nn.functional, name):
        return f"F.{name}({arg})"
    return f"torch.{name}({arg})"


def _deterministic(spec: OpSpec) -> bool:
    """Same input twice, same output (drops anything random that slipped through by name)."""
    shape = PROBE_SHAPES[spec.ranks[0]]
    torch.manual_seed(0)
    x = torch.randn(shape)
    try:
        if spec.kind == "module":
            cls = getattr(nn, spec.name)
            module = cls(**constructor_args(cls, shape, 24)).eval()
            with torch.no_grad():
                a, b = module(x), module(x)
        else:
            fn = function_for(spec.name)
            assert fn is not None
            a, b = fn(x), fn(x)
    except Exception:
        return False
    return bool(torch.equal(a, b))
