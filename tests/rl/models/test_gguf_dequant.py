"""The faster GGUF reading of a conversion (``rl.models.gguf_dequant``, ``gguf_convert``'s
plain-ndarray reader) gives gguf-py's results bit for bit.

Q5_0 and Q8_0 blocks of random bytes (finite float16 scales) across more than one chunk are
de-quantised to the bytes ``gguf.quants.dequantize`` gives; other types are gguf-py's. A small
GGUF written here with gguf-py's writer reads to the same fields and tensors through the plain
reader, none of them a ``numpy.memmap``, and while a conversion reads it the ``gguf`` package
answers with the one parsed reader and the fast functions, restored afterwards. The 0.5B's
converted folder is compared with the unpatched conversion's by hand (the commit message).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader, GGUFWriter  # noqa: E402
from gguf.quants import dequantize as gguf_dequantize  # noqa: E402
from gguf.quants import quantize  # noqa: E402

from cuda_agent.rl.models.gguf_convert import _gguf_sped_up, plain_reader  # noqa: E402
from cuda_agent.rl.models.gguf_dequant import CHUNK, FAST, dequantize  # noqa: E402


def random_blocks(qtype: GGMLQuantizationType, rows: int, blocks_per_row: int) -> np.ndarray:
    size = FAST[qtype][0]
    rng = np.random.default_rng(int(qtype))
    data = rng.integers(0, 256, size=(rows, blocks_per_row, size), dtype=np.uint8)
    scales = rng.uniform(-2.0, 2.0, size=(rows, blocks_per_row)).astype(np.float16)
    data[..., :2] = scales.view(np.uint8).reshape(rows, blocks_per_row, 2)
    return data.reshape(rows, blocks_per_row * size)


@pytest.mark.parametrize("qtype", sorted(FAST))
def test_q5_0_and_q8_0_are_gguf_py_s_bytes_across_chunks(qtype: GGMLQuantizationType) -> None:
    data = random_blocks(qtype, rows=3, blocks_per_row=CHUNK // 2 + 7)  # 1.5 chunks and a bit
    ours, theirs = dequantize(data, qtype), gguf_dequantize(data, qtype)
    assert ours.shape == theirs.shape == (3, (CHUNK // 2 + 7) * 32)
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.tobytes() == theirs.tobytes()
    row = data[1]  # one dimension
    assert dequantize(row, qtype).tobytes() == gguf_dequantize(row, qtype).tobytes()


def test_other_types_are_gguf_py_s() -> None:
    rng = np.random.default_rng(0)
    for qtype in (GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K):
        size = GGML_QUANT_SIZES[qtype][1]
        packed = rng.integers(0, 256, size=(4, 2 * size), dtype=np.uint8)
        assert dequantize(packed, qtype).tobytes() == gguf_dequantize(packed, qtype).tobytes()
    halves = rng.standard_normal((4, 64)).astype(np.float16).view(np.uint8)
    assert np.array_equal(
        dequantize(halves, GGMLQuantizationType.F16),
        gguf_dequantize(halves, GGMLQuantizationType.F16),
    )


def small_gguf(path: Path) -> Path:
    writer = GGUFWriter(str(path), "qwen2")
    writer.add_uint32("qwen2.block_count", 2)
    writer.add_array("tokenizer.ggml.tokens", ["a", "bc", "Ġdéf", "<|im_end|>"])
    writer.add_array("tokenizer.ggml.token_type", [1, 1, 1, 3])
    weights = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    for qtype in (GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q5_0):
        writer.add_tensor(f"blk.0.{qtype.name}.weight", quantize(weights, qtype), raw_dtype=qtype)
    writer.add_tensor("output_norm.weight", weights[0])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_plain_reader_reads_what_gguf_py_reads_without_memmaps(tmp_path: Path) -> None:
    path = small_gguf(tmp_path / "small.gguf")
    plain, real = plain_reader(path), GGUFReader(str(path))
    assert list(plain.fields) == list(real.fields)
    for name, field in real.fields.items():
        other = plain.fields[name]
        assert (other.types, other.data, other.offset) == (field.types, field.data, field.offset)
        assert [(p.dtype, p.tobytes()) for p in other.parts] == [
            (p.dtype, p.tobytes()) for p in field.parts
        ]
        assert all(type(part) is np.ndarray for part in other.parts)
    assert len(plain.tensors) == len(real.tensors) == 3
    for ours, theirs in zip(plain.tensors, real.tensors, strict=True):
        assert (ours.name, ours.tensor_type, ours.data.shape) == (
            theirs.name,
            theirs.tensor_type,
            theirs.data.shape,
        )
        assert type(ours.data) is np.ndarray and ours.data.tobytes() == theirs.data.tobytes()
        assert (
            dequantize(ours.data, ours.tensor_type).tobytes()
            == gguf_dequantize(theirs.data, theirs.tensor_type).tobytes()
        )


def test_while_converting_the_gguf_package_answers_with_the_fast_reader_and_functions(
    tmp_path: Path,
) -> None:
    path, other = small_gguf(tmp_path / "small.gguf"), small_gguf(tmp_path / "other.gguf")
    real = (gguf.GGUFReader, gguf.get_tensor_name_map, gguf.dequantize)
    with _gguf_sped_up(path):
        first = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(str(tmp_path / "." / "small.gguf")) is first  # parsed once
        assert type(first.tensors[0].data) is np.ndarray
        assert type(gguf.GGUFReader(str(other))) is real[0]  # another file: gguf-py's
        assert gguf.dequantize is dequantize
        arch = gguf.MODEL_ARCH.QWEN2
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
        assert gguf.get_tensor_name_map(arch, 2).mapping == real[1](arch, 2).mapping
    assert (gguf.GGUFReader, gguf.get_tensor_name_map, gguf.dequantize) == real
