"""The programmatic composer: random, shape-correct stacks of 1-5 catalogue operators.

Deterministic given a seed. A share of seeds (1.18%, as the paper) instead becomes one
standalone transformers block (``transformers_blocks.py``) when transformers is installed.
The number of operators follows the composition of the paper's
dataset (Table 3: 3.4% one op, 83.8% two, 7.6% three, 2.8% four, 1.2% five), renormalised to
``max_ops``. Each next operator is drawn among those that accept the current tensor's rank; the
shape after it is inferred by running it on ``meta`` tensors. Sometimes (15%) a residual add
joins the input to the output when their shapes agree, which makes a small DAG. Sizes are drawn
per rank and scaled towards a number of input elements (``ScaleProfile``), so that eager
runtimes tend to land in the filter's window; the filter decides.
"""

from __future__ import annotations

import hashlib
import random
import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from cuda_agent.synth.catalogue import OpSpec, function_code, torch_catalogue
from cuda_agent.synth.transformers_blocks import (
    BlockScale,
    BlockSpec,
    render_block,
    transformers_catalogue,
)

OP_COUNT_WEIGHTS = {1: 3.40, 2: 83.77, 3: 7.62, 4: 2.80, 5: 1.23}
RANK_WEIGHTS = {2: 0.40, 3: 0.15, 4: 0.35, 5: 0.10}
RESIDUAL_PROBABILITY = 0.15
TRANSFORMERS_SHARE = 0.0118  # the paper's Table 3
GPU_BLOCKS = BlockScale.named("gpu")
DIM_NAMES = {
    2: ("batch_size", "features"),
    3: ("batch_size", "seq_len", "features"),
    4: ("batch_size", "channels", "height", "width"),
    5: ("batch_size", "channels", "depth", "height", "width"),
}


@dataclass(frozen=True)
class ScaleProfile:
    """Target number of input elements (log-uniform between the bounds), layer widths, and
    the sizes of transformers blocks."""

    min_elements: int
    max_elements: int
    widths: tuple[int, ...]
    blocks: BlockScale = GPU_BLOCKS

    @classmethod
    def named(cls, name: str) -> ScaleProfile:
        if name == "gpu":
            return cls(1 << 25, 1 << 29, (128, 256, 512, 1024, 2048), BlockScale.named("gpu"))
        if name == "cpu":
            return cls(1 << 12, 1 << 16, (16, 32, 64), BlockScale.named("cpu"))
        raise ValueError(f"unknown scale {name!r} (gpu or cpu)")


@dataclass
class Candidate:
    id: str
    seed: int
    source: str
    ops: list[str]
    composer: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    data_source: str
    extra: dict[str, Any] = field(default_factory=dict)


def compose(
    seed: int,
    max_ops: int = 5,
    scale: ScaleProfile | None = None,
    catalogue: tuple[OpSpec, ...] | None = None,
    attempts: int = 50,
    transformers_share: float = TRANSFORMERS_SHARE,
) -> Candidate:
    """A new problem for ``seed`` (the same seed always gives the same problem).

    A share of seeds (the paper's 1.18%) becomes one standalone transformers block, when
    transformers is installed; that draw has its own random stream, so every other seed gives
    the same problem with or without transformers.
    """
    scale = scale or ScaleProfile.named("gpu")
    blocks = transformers_catalogue()
    pick = random.Random(f"{seed}:transformers")
    if blocks and pick.random() < transformers_share:
        return _block_candidate(seed, pick.choice(blocks), scale.blocks)
    rng = random.Random(seed)
    catalogue = catalogue or torch_catalogue()
    for _ in range(attempts):
        count = _weighted(rng, {k: w for k, w in OP_COUNT_WEIGHTS.items() if k <= max_ops})
        rank = _weighted(rng, RANK_WEIGHTS)
        shape = _sample_shape(rng, rank, scale)
        chain = _chain(rng, shape, count, scale, catalogue)
        if chain is not None:
            steps, out_shape = chain
            residual = out_shape == shape and rng.random() < RESIDUAL_PROBABILITY
            source = _render(seed, shape, steps, residual)
            digest = hashlib.sha256(source.encode()).hexdigest()[:10]
            names = [step.name for step, _ in steps]
            return Candidate(
                f"synth_{seed}_{digest}",
                seed,
                source,
                names,
                "programmatic",
                shape,
                out_shape,
                f"torch#{len(steps)}",
                {"residual": residual},
            )
    raise RuntimeError(f"seed {seed}: no valid operator stack found in {attempts} attempts")


def _block_candidate(seed: int, spec: BlockSpec, scale: BlockScale) -> Candidate:
    source, shape = render_block(spec, seed, scale)
    digest = hashlib.sha256(source.encode()).hexdigest()[:10]
    out = (*shape[:2], 4 * shape[2] if spec.widens else shape[2])
    return Candidate(
        f"synth_{seed}_{digest}",
        seed,
        source,
        [spec.name],
        "programmatic",
        shape,
        out,
        "transformers#1",
        {"family": spec.family},
    )


def _chain(
    rng: random.Random,
    shape: tuple[int, ...],
    count: int,
    scale: ScaleProfile,
    catalogue: tuple[OpSpec, ...],
) -> tuple[list[tuple[OpSpec, dict[str, Any]]], tuple[int, ...]] | None:
    steps: list[tuple[OpSpec, dict[str, Any]]] = []
    current = shape
    for _ in range(count):
        choices = [
            s
            for s in catalogue
            if len(current) in s.ranks and (not steps or s.name != steps[-1][0].name)
        ]
        rng.shuffle(choices)
        for spec in choices[:8]:
            args = (
                spec.module_args(current, rng.choice(scale.widths)) if spec.kind == "module" else {}
            )
            out = _infer(spec, args, current)
            if out is not None and 0 < _numel(out) <= 2 * scale.max_elements:
                steps.append((spec, args))
                current = out
                break
        else:
            return None
    return steps, current


def _infer(spec: OpSpec, args: dict[str, Any], shape: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        with warnings.catch_warnings(), torch.device("meta"):
            warnings.simplefilter("ignore")
            x = torch.empty(shape)
            if spec.kind == "module":
                out = getattr(nn, spec.name)(**args)(x)
            else:
                from cuda_agent.synth.catalogue import function_for

                fn = function_for(spec.name)
                assert fn is not None
                out = fn(x)
    except Exception:  # the op does not accept this shape
        return None
    return tuple(out.shape) if isinstance(out, torch.Tensor) else None


def _sample_shape(rng: random.Random, rank: int, scale: ScaleProfile) -> tuple[int, ...]:
    target = int(
        2 ** rng.uniform(scale.min_elements.bit_length() - 1, scale.max_elements.bit_length() - 1)
    )
    small = scale.widths[0] < 64
    if rank == 2:
        dims = [1, rng.choice(scale.widths) * (1 if small else 2)]
    elif rank == 3:
        dims = [1, rng.choice((16, 32, 64) if small else (128, 256, 512)), rng.choice(scale.widths)]
    elif rank == 4:
        side = rng.choice((8, 12, 16) if small else (32, 64, 128))
        dims = [1, rng.choice((3, 8, 16) if small else (16, 32, 64, 128)), side, side]
    else:
        side = rng.choice((4, 6) if small else (16, 32))
        dims = [1, rng.choice((4, 8) if small else (8, 16, 32)), side, side, side]
    per_sample = _numel(tuple(dims[1:]))
    dims[0] = max(1, min(1 << 16, target // max(1, per_sample)))
    return tuple(dims)


def _render(
    seed: int, shape: tuple[int, ...], steps: list[tuple[OpSpec, dict[str, Any]]], residual: bool
) -> str:
    names = DIM_NAMES[len(shape)]
    layers = [(i, spec, args) for i, (spec, args) in enumerate(steps) if spec.kind == "module"]
    description = " -> ".join(spec.name for spec, _ in steps) + (" + residual" if residual else "")
    lines = [
        f'"""Synthesised problem (programmatic composer, seed {seed}): {description}."""',
        "",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
    ]
    lines += [f"{name} = {value}" for name, value in zip(names, shape, strict=True)]
    lines += [
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
    ]
    for i, spec, args in layers:
        rendered = ", ".join(f"{k}={v!r}" for k, v in args.items())
        lines.append(f"        self.op{i} = nn.{spec.name}({rendered})")
    lines += ["", "    def forward(self, x):"]
    if residual:
        lines.append("        skip = x")
    for i, (spec, _) in enumerate(steps):
        expr = f"self.op{i}(x)" if spec.kind == "module" else function_code(spec.name, "x")
        lines.append(f"        x = {expr}")
    lines.append("        return x + skip" if residual else "        return x")
    lines += [
        "",
        "",
        "def get_inputs():",
        f"    return [torch.randn({', '.join(names)})]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)


def _weighted(rng: random.Random, weights: dict[int, float]) -> int:
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n
