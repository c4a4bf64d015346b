"""Generated replies kept on disk before they are scored, so a run cut while scoring keeps them.

``kept(path, key)`` returns the replies a file holds for ``key`` (None: no file, or one made
for another key); ``keep(path, key, replies)`` writes them (through a temporary file, so a
cut write leaves no half file). ``replies_key(model_path, settings, prompts)`` is what
decides the replies: the model's weights (``model_fingerprint``: a local model folder's
files hashed, since a fine-tuned model is written again at the same path), the sampling
settings (their seed included) and every prompt, in order.

Generating is the slow part of a sample on one GPU (the train split's 160 prompts x 8
replies: about 150 s on the H200), and scoring can be cut by a call's time limit; with the
verdicts already kept as they are made (``verdicts.VerdictCache``), a second run of the
same sample then does neither again.

What it does not do: generate (``generation``) or score (``verdicts``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cuda_agent.rl.curriculum.generation import Reply, SamplingSettings

CHUNK = 1 << 20


def model_fingerprint(model_path: str) -> str:
    """A local model folder's files (names and contents) hashed; a name that is not a folder
    stands for itself."""
    folder = Path(model_path)
    if not folder.is_dir():
        return model_path
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as handle:
            while block := handle.read(CHUNK):
                digest.update(block)
    return digest.hexdigest()


def replies_key(model_path: str, settings: SamplingSettings, prompts: list[Any]) -> str:
    """What decides a sample's replies, hashed (see the module docstring)."""
    text = json.dumps(
        [model_fingerprint(model_path), asdict(settings), prompts], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def keep(path: Path, key: str, replies: list[list[Reply]]) -> None:
    """``replies`` (one list per prompt) into ``path``, under ``key``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"key": key, "prompts": len(replies)})]
    lines += [json.dumps([asdict(reply) for reply in group]) for group in replies]
    partial = path.with_name(path.name + ".partial")
    partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(partial, path)


def kept(path: Path, key: str) -> list[list[Reply]] | None:
    """The replies ``path`` holds for ``key``; None where there is no such file, or it was
    made for another key (another model, settings or prompts)."""
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0]) if lines else {}
    if head.get("key") != key:
        return None
    groups = [[Reply(**reply) for reply in json.loads(line)] for line in lines[1:] if line]
    return groups if len(groups) == head.get("prompts") else None
