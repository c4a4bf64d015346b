"""A GGUF file converted into an ordinary transformers folder.

``convert_gguf(gguf, out, record, dtype, chat_template)`` reads the GGUF with transformers
(``from_pretrained(folder, gguf_file=...)``, which needs the ``gguf`` package and de-quantises
every weight), and saves ``out``: ``config.json``, ``model.safetensors`` in ``dtype``, the
tokenizer files with ``chat_template`` and the agent's response parser
(``rl.models.tiny.RESPONSE_TEMPLATE``: ChatML turns, hermes ``<tool_call>`` blocks),
``generation_config.json``, and ``record`` as ``gguf_source.json``.

The GGUF loader marks its model quantised, which ``save_pretrained`` refuses; the weights are
moved into a plain model of the same configuration built on the meta device and loaded with
``assign=True``, so the conversion holds one copy of the weights, not two (a 1.5 B model in
float32 is 6 GB).

transformers (its legacy GGUF loader, which Qwen2 and Llama files take) parses the header with
``gguf.GGUFReader``, reads every field of it three times (the tokenizer's configuration, the
model's, and again with the weights), maps the tensor names with ``gguf.get_tensor_name_map``
and de-quantises with ``gguf.dequantize``. For Qwen2.5-Coder-0.5B that took about 75 s on two
cores; while the GGUF is read, ``_gguf_sped_up`` puts functions with the same results in the
package's place, and it takes about 43 s:

* ``GGUFReader``: this file is parsed once for the three reads, over a plain ndarray view of
  its memory map rather than a ``numpy.memmap``, whose Python ``__getitem__`` runs for every
  slice the parser takes (455k for the 0.5B's 151k tokens and 151k merges) and every byte
  transformers reads of a string: parsing took 24 s and takes 8 s, each read 9 s and 3 s.
* ``get_tensor_name_map``: memoised (transformers builds one for each of the model's 319
  modules: 7 s).
* ``dequantize``: ``rl.models.gguf_dequant``'s (Q5_0 and Q8_0 about three times faster).

The 0.5B's and SmolLM2's converted folders are byte-identical to the unpatched conversion's.

``check_folder(name, folder, sha256)`` refuses a converted folder whose record does not name
the GGUF it is used for. What it does not do: find or check the GGUF itself (``rl.models.smollm2``,
``rl.models.gguf_parts``), keep the quantisation, or publish the folder atomically (callers build
into ``core.published.build_once``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cuda_agent.rl.models import ModelPathError

SOURCE_FILE = "gguf_source.json"
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")


def convert_gguf(
    gguf: Path, out: Path, record: dict[str, Any], dtype: str, chat_template: str
) -> None:
    """Save ``gguf`` to ``out`` as a transformers folder (see the module docstring)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from cuda_agent.rl.models.tiny import RESPONSE_TEMPLATE

    hf_logging.disable_progress_bar()
    torch_dtype = getattr(torch, dtype)
    with _gguf_sped_up(gguf):
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch_dtype
        )
    config = copy.deepcopy(loaded.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.load_state_dict(loaded.state_dict(), strict=True, assign=True)
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    model.generation_config = loaded.generation_config
    del loaded
    tokenizer.chat_template = chat_template
    tokenizer.response_template = RESPONSE_TEMPLATE
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / SOURCE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _gguf_sped_up(gguf: Path) -> Iterator[None]:
    """While open, the ``gguf`` package's ``GGUFReader`` of ``gguf`` (read-only) is one reader
    parsed once over a plain ndarray, its ``get_tensor_name_map`` is memoised and its
    ``dequantize`` is ``rl.models.gguf_dequant``'s (module docstring)."""
    import gguf as gguf_package

    from cuda_agent.rl.models.gguf_dequant import dequantize

    real = gguf_package.GGUFReader
    parsed = plain_reader(gguf)

    def reader(path: Any, mode: Any = "r") -> Any:
        if mode == "r" and Path(path).resolve() == gguf.resolve():
            return parsed
        return real(path, mode)

    faster = {
        "GGUFReader": reader,
        "get_tensor_name_map": functools.cache(gguf_package.get_tensor_name_map),
        "dequantize": dequantize,
    }
    saved = {name: getattr(gguf_package, name) for name in faster}
    for name, value in faster.items():
        setattr(gguf_package, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(gguf_package, name, value)


def plain_reader(gguf: Path) -> Any:
    """``gguf.GGUFReader(gguf)`` whose data (and so every field part and tensor) is a plain
    ndarray view of the memory map, not a ``numpy.memmap``: the same bytes, read without a
    Python call per slice or element."""
    import numpy as np
    from gguf import GGUFReader

    class PlainReader(GGUFReader):
        @property
        def data(self) -> Any:
            return self._plain

        @data.setter
        def data(self, mapped: Any) -> None:
            self._plain = mapped.view(np.ndarray)

    return PlainReader(str(gguf))


def gguf_chat_template(gguf: Path) -> str:
    """The chat template a GGUF carries (``tokenizer.chat_template``), or ``""``."""
    from gguf import GGUFReader

    field = GGUFReader(str(gguf)).fields.get("tokenizer.chat_template")
    return str(field.contents()) if field is not None else ""


def check_folder(name: str, folder: Path, sha256: str) -> None:
    """Refuse a converted folder whose record does not name this GGUF (or is missing)."""
    try:
        record = json.loads((folder / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    recorded = record.get("gguf_sha256") if isinstance(record, dict) else None
    weights = any((folder / f).is_file() for f in WEIGHT_FILES)
    if recorded != sha256 or not weights:
        found = f"records GGUF SHA-256 {recorded}" if recorded else f"has no valid {SOURCE_FILE}"
        raise ModelPathError(
            f"model {name!r}: {folder} {found}, not the installed GGUF's {sha256} "
            "(remove that folder to convert again)"
        )
