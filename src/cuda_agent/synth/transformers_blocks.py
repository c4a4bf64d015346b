"""Standalone transformers blocks as problems (``transformers#1``), when transformers is installed.

The paper mines ``transformers`` too, and uses its modules alone, never stacked (they are
already high-level). The catalogue is crawled: for a list of model families (``FAMILIES``:
the modelling module, its config class and how to size it), every ``nn.Module`` class the
module defines (not a ``PreTrainedModel``, not a head, pooler or embedding) is built from a
small config (or from the hidden size, for norms), run on a ``(batch, seq, hidden)`` tensor on
the CPU twice in eval mode, and kept when it returns a tensor of that rank, the same both
times. ``render_block`` writes the KernelBench-format problem: the block built from its config
in ``__init__`` (eager attention), a tuple output reduced to its first tensor.

Without transformers, ``transformers_catalogue()`` is empty and the composer never draws one.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn

SizeArgs = Callable[[int, int, int], dict[str, int]]


def _decoder(hidden: int, inner: int, heads: int) -> dict[str, int]:
    return {
        "hidden_size": hidden,
        "intermediate_size": inner,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
    }


FAMILIES: dict[str, tuple[str, SizeArgs]] = {
    "llama": ("LlamaConfig", _decoder),
    "mistral": ("MistralConfig", _decoder),
    "qwen2": ("Qwen2Config", _decoder),
    "gemma": ("GemmaConfig", lambda h, i, n: {**_decoder(h, i, n), "head_dim": h // n}),
    "phi3": ("Phi3Config", _decoder),
    "gpt2": ("GPT2Config", lambda h, i, n: {"n_embd": h, "n_inner": i, "n_head": n}),
    "bert": (
        "BertConfig",
        lambda h, i, n: {"hidden_size": h, "intermediate_size": i, "num_attention_heads": n},
    ),
    "t5": ("T5Config", lambda h, i, n: {"d_model": h, "d_ff": i, "num_heads": n, "d_kv": h // n}),
    "gpt_neox": (
        "GPTNeoXConfig",
        lambda h, i, n: {"hidden_size": h, "intermediate_size": i, "num_attention_heads": n},
    ),
    "vit": (
        "ViTConfig",
        lambda h, i, n: {"hidden_size": h, "intermediate_size": i, "num_attention_heads": n},
    ),
}
SKIPPED_NAMES = ("Head", "Pooler", "Summary", "Embedding", "Model", "For", "Decoder", "Encoder")
PROBE = (2, 8, 64)  # batch, sequence, hidden
HEAD_DIM = 64


@dataclass(frozen=True)
class BlockSpec:
    family: str
    name: str  # the class, e.g. LlamaMLP
    module: str  # e.g. transformers.models.llama.modeling_llama
    config: str  # e.g. LlamaConfig
    takes_config: bool  # built from a config; otherwise from the hidden size (norms)
    widens: bool  # the output's last dimension is the intermediate size


@dataclass(frozen=True)
class BlockScale:
    hidden: tuple[int, ...]
    seq: tuple[int, ...]
    min_elements: int
    max_elements: int

    @classmethod
    def named(cls, name: str) -> BlockScale:
        if name == "gpu":
            return cls((1024, 2048), (256, 512, 1024), 1 << 22, 1 << 25)
        if name == "cpu":
            return cls((64, 128), (16, 32), 1 << 10, 1 << 14)
        raise ValueError(f"unknown scale {name!r} (gpu or cpu)")


@functools.lru_cache(maxsize=1)
def transformers_catalogue() -> tuple[BlockSpec, ...]:
    """The blocks that work standalone (empty when transformers is not installed)."""
    try:
        import transformers  # noqa: F401
        from transformers import PreTrainedModel
    except ImportError:
        return ()
    specs: list[BlockSpec] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for family, (config_name, size_args) in FAMILIES.items():
            module_name = f"transformers.models.{family}.modeling_{family}"
            try:
                module = importlib.import_module(module_name)
                config_cls = getattr(importlib.import_module("transformers"), config_name)
            except (ImportError, AttributeError):
                continue  # another transformers version: that family is skipped
            hidden = PROBE[2]
            config = config_cls(**size_args(hidden, 2 * hidden, 2), attn_implementation="eager")
            for name, cls in sorted(vars(module).items()):
                if (
                    not inspect.isclass(cls)
                    or not issubclass(cls, nn.Module)
                    or cls.__module__ != module_name
                    or issubclass(cls, PreTrainedModel)
                    or any(word in name for word in SKIPPED_NAMES)
                ):
                    continue
                spec = _probe(family, name, cls, module_name, config_name, config, hidden)
                if spec is not None:
                    specs.append(spec)
    return tuple(specs)


def _probe(
    family: str, name: str, cls: type, module: str, config_name: str, config: object, hidden: int
) -> BlockSpec | None:
    takes_config = _takes_config(cls)
    try:
        torch.manual_seed(0)
        block = (cls(config) if takes_config else cls(hidden)).eval()
        x = torch.randn(PROBE)
        with torch.no_grad():
            first, second = _first_tensor(block(x)), _first_tensor(block(x))
    except Exception:  # needs more than hidden states (masks, position embeddings, ...)
        return None
    if first is None or second is None or first.dim() != 3 or not torch.equal(first, second):
        return None
    if tuple(first.shape[:2]) != PROBE[:2] or first.shape[2] not in (hidden, 2 * hidden):
        return None
    return BlockSpec(family, name, module, config_name, takes_config, first.shape[2] != hidden)


def render_block(spec: BlockSpec, seed: int, scale: BlockScale) -> tuple[str, tuple[int, ...]]:
    """The problem source for ``spec`` at sizes drawn from ``seed``, and its input shape."""
    rng = random.Random(seed)
    hidden = rng.choice(scale.hidden)
    seq = rng.choice(scale.seq)
    inner = 4 * hidden
    heads = max(1, hidden // HEAD_DIM)
    target = 2 ** rng.uniform(
        scale.min_elements.bit_length() - 1, scale.max_elements.bit_length() - 1
    )
    batch = max(1, int(target) // (seq * hidden))
    _, size_args = FAMILIES[spec.family]
    config_args = ", ".join(f"{k}={v!r}" for k, v in size_args(hidden, inner, heads).items())
    if spec.takes_config:
        imports = [f"from transformers import {spec.config}"]
        build = [
            f'        config = {spec.config}({config_args}, attn_implementation="eager")',
            f"        self.block = {spec.name}(config)",
        ]
    else:  # norms take the hidden size
        imports, build = [], [f"        self.block = {spec.name}(hidden_size)"]
    lines = [
        f'"""Synthesised problem (transformers block, seed {seed}): {spec.name} '
        f'from transformers ({spec.family})."""',
        "",
        "import torch",
        "import torch.nn as nn",
        *imports,
        f"from {spec.module} import {spec.name}",
        "",
        f"batch_size = {batch}",
        f"seq_len = {seq}",
        f"hidden_size = {hidden}",
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        *build,
        "",
        "    def forward(self, x):",
        "        out = self.block(x)",
        "        return out[0] if isinstance(out, tuple) else out",
        "",
        "",
        "def get_inputs():",
        "    return [torch.randn(batch_size, seq_len, hidden_size)]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines), (batch, seq, hidden)


def _takes_config(cls: type) -> bool:
    params = list(inspect.signature(cls.__init__).parameters)[1:]  # type: ignore[misc]
    return bool(params) and params[0] == "config"


def _first_tensor(out: object) -> torch.Tensor | None:
    if isinstance(out, tuple):
        out = out[0] if out else None
    return out if isinstance(out, torch.Tensor) else None
