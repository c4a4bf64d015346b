"""GGUF's Q5_0 and Q8_0 blocks de-quantised bit for bit as ``gguf.dequantize`` does, faster.

``dequantize(data, qtype)`` is ``gguf.dequantize``'s signature and result (float32, the
same bytes): Q5_0 and Q8_0 here, every other type by ``gguf.quants.dequantize`` itself. Each
weight is one float32 product of its block's float16 scale and a small integer (exact in
float32), so computing the integer another way cannot change a bit. gguf-py calls numpy for
every 16 rows and unpacks Q5_0's fifth bits by shifting a 32-wide uint32 array; here the bits
come from ``np.unpackbits`` and the blocks go in chunks of ``CHUNK`` (small enough for the
cache), about two and a half times faster: Qwen2.5-Coder-0.5B's 133 Q5_0 and 13 Q8_0 tensors
took 14 s and take 5 s on two cores (24 s and 11 s while other work shared them).
``gguf_convert`` puts this in ``gguf.dequantize``'s place while transformers reads a GGUF.

What it does not do: quantise, or handle the lazy tensors of gguf-py's writer (those go to
gguf-py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize

CHUNK = 1 << 14  # blocks per numpy pass
Q5_0_VALUES = np.arange(-16, 16, dtype=np.float32)  # a Q5_0 weight's 5 bits, minus 16


def _q5_0(blocks: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """Q5_0: a float16 scale, 32 fifth bits (little-endian), 32 low nibbles (weight i in the
    low nibble of byte i, weight i + 16 in its high one)."""
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 6:]
    q = np.empty((len(blocks), 32), dtype=np.uint8)
    np.bitwise_and(nibbles, 0x0F, out=q[:, :16])
    np.right_shift(nibbles, 4, out=q[:, 16:])
    fifth = np.unpackbits(blocks[:, 2:6], axis=1, bitorder="little")
    fifth <<= 4
    q |= fifth
    weights = np.take(Q5_0_VALUES, q)
    weights *= scale
    return weights


def _q8_0(blocks: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """Q8_0: a float16 scale and 32 int8 weights."""
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    weights = blocks[:, 2:].view(np.int8).astype(np.float32)
    weights *= scale
    return weights


# type: (bytes per block, de-quantise a (blocks, bytes) array into (blocks, 32) float32)
FAST: dict[GGMLQuantizationType, tuple[int, Callable[[Any], npt.NDArray[np.float32]]]] = {
    GGMLQuantizationType.Q5_0: (22, _q5_0),
    GGMLQuantizationType.Q8_0: (34, _q8_0),
}


def dequantize(data: Any, qtype: GGMLQuantizationType) -> Any:
    """``gguf.dequantize(data, qtype)``, the same float32 bytes (module docstring)."""
    fast = FAST.get(qtype)
    if (
        fast is None
        or not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim == 0
        or data.shape[-1] % fast[0]
    ):
        return gguf_dequantize(data, qtype)
    size, unpack = fast
    blocks = data.reshape(-1, size)
    out = np.empty((len(blocks), 32), dtype=np.float32)
    for start in range(0, len(blocks), CHUNK):
        out[start : start + CHUNK] = unpack(blocks[start : start + CHUNK])
    return out.reshape(*data.shape[:-1], data.shape[-1] // size * 32)
