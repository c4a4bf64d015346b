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

transformers parses the GGUF's header three times (for the tokenizer, the configuration and
the weights; about 9 s each for the 0.5B's 151k-token vocabulary on two cores); during the
conversion ``gguf.GGUFReader`` answers those reads of this file with one parsed reader.

``check_folder(name, folder, sha256)`` refuses a converted folder whose record does not name
the GGUF it is used for. What it does not do: find or check the GGUF itself (``rl.models.smollm2``,
``rl.models.gguf_parts``), keep the quantisation, or publish the folder atomically (callers build
into ``core.published.build_once``).
"""

from __future__ import annotations

import contextlib
import copy
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
    with _parsed_once(gguf):
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
def _parsed_once(gguf: Path) -> Iterator[None]:
    """While open, ``gguf.GGUFReader`` of ``gguf`` (read-only) is one reader parsed once."""
    import gguf as gguf_package

    real = gguf_package.GGUFReader
    parsed = real(str(gguf))

    def reader(path: Any, mode: Any = "r") -> Any:
        if mode == "r" and Path(path).resolve() == gguf.resolve():
            return parsed
        return real(path, mode)

    gguf_package.GGUFReader = reader  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        gguf_package.GGUFReader = real  # type: ignore[misc]


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
