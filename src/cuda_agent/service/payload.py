"""A submitted evaluation, turned into the problem, the solution and the options it names.

A submission (``schemas.Submission``) names its problem by bundled id, by source text, or by
the content hash of a source submitted before, and its solution as single-file text or as a
workdir archive (base64 of a ``.tar.gz`` or ``.zip``). Archives are read in memory, member by
member, and refused whole (``PayloadError``, a 4xx) when a member escapes its folder (an
absolute path, ``..``), is a link, a device or a fifo, or when members are too many or too
large; only source files are kept, as ``solutions.loader`` keeps them. A problem file on the
server's disk can never be named (an id is a bundled problem, nothing else).

What it does not do: evaluate, or decide who may submit (``auth.py``).
"""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from cuda_agent.core.errors import CudaAgentError
from cuda_agent.core.hashing import files_hash, normalise_text, text_hash
from cuda_agent.core.types import Problem, Solution, SolutionKind
from cuda_agent.evaluator.options import EvalOptions
from cuda_agent.problems.sets import bundled_entries, resolve_problem
from cuda_agent.problems.source import check_problem_source
from cuda_agent.solutions.loader import MAX_BYTES, MAX_FILES, SNAPSHOT_SUFFIXES, WORKDIR_ENTRY

MAX_MEMBER_BYTES = 2 * 1024 * 1024
MAX_MEMBERS = 10_000  # entries read at all, kept or not
MAX_DECLARED_BYTES = 64 * 1024 * 1024  # what the members say they hold, kept or not
SIZES = ("small", "standard")
# the options a client may set; seeds are the service's own (secret), never the client's
CLIENT_OPTIONS = (
    "policy",
    "precision",
    "trials",
    "atol",
    "rtol",
    "baselines",
    "reward",
    "shapes",
    "reward_shapes",
    "language",
)


class PayloadError(ValueError):
    """A submission that cannot be evaluated as sent; ``status`` is the HTTP code to answer."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Evaluation:
    problem: Problem
    solution: Solution
    options: EvalOptions


def problem_of(spec: dict[str, Any], size: str, known_source: Any) -> Problem:
    """The problem a submission names; ``known_source(hash)`` looks up earlier sources."""
    if size not in SIZES:
        raise PayloadError(f"size {size!r}: choose from {', '.join(SIZES)}")
    given = [k for k in ("id", "source", "hash") if spec.get(k) is not None]
    if len(given) != 1:
        raise PayloadError("the problem needs exactly one of id, source or hash")
    if "id" in given:
        ids = {e.id for e in bundled_entries()}
        if spec["id"] not in ids:
            raise PayloadError(f"problem id {spec['id']!r} is not a bundled problem", 404)
        return resolve_problem(str(spec["id"]), size)
    if "hash" in given:
        source = known_source(str(spec["hash"]))
        if source is None:
            raise PayloadError(f"no problem with hash {spec['hash']} was submitted here", 404)
    else:
        source = normalise_text(str(spec["source"]))
    name = str(spec.get("name") or "problem")
    if not name.replace("_", "").replace("-", "").isalnum():
        raise PayloadError(f"problem name {name!r}: letters, digits, '_' and '-' only")
    try:
        check_problem_source(source, f"{name}.py")
    except CudaAgentError as err:
        raise PayloadError(str(err)) from None
    return Problem(name, Path(f"<{name}>"), source, text_hash(source), size=size)


def solution_of(spec: dict[str, Any]) -> Solution:
    given = [k for k in ("text", "archive") if spec.get(k) is not None]
    if len(given) != 1:
        raise PayloadError("the solution needs exactly one of text or archive")
    if "text" in given:
        text = normalise_text(str(spec["text"]))
        if len(text.encode()) > MAX_MEMBER_BYTES:
            raise PayloadError("the solution text is too large", 413)
        files = {"solution.py": text}
        return Solution(
            SolutionKind.SINGLE_FILE, Path("solution.py"), files, files_hash(files.items())
        )
    files = read_archive(str(spec["archive"]))
    if WORKDIR_ENTRY not in files:
        raise PayloadError(f"the archive holds no {WORKDIR_ENTRY} at its top level")
    return Solution(SolutionKind.WORKDIR, Path("workdir"), files, files_hash(files.items()))


def options_of(spec: dict[str, Any], backend: str, base: EvalOptions) -> EvalOptions:
    unknown = sorted(set(spec) - set(CLIENT_OPTIONS))
    if unknown:
        raise PayloadError(f"unknown or server-side option(s): {', '.join(unknown)}")
    values = {**base.__dict__, **spec, "backend": backend, "seed": None}
    if "baselines" in spec:
        values["baselines"] = tuple(spec["baselines"])
    try:
        return EvalOptions(**values).validate()
    except (CudaAgentError, TypeError) as err:
        raise PayloadError(str(err)) from None


def read_archive(encoded: str) -> dict[str, str]:
    """The source files of a workdir archive (see the module docstring)."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise PayloadError("the archive is not valid base64") from None
    if data[:2] == b"PK":
        return _read_zip(data)
    return _read_tar(data)


def _member_path(name: str) -> str | None:
    """The member's path inside the workdir, None for a folder entry; refused if it escapes."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise PayloadError(f"archive member {name!r} escapes its folder")
    clean = posixpath.normpath(str(path))
    return None if clean in (".", "") else clean


def _keep(rel: str) -> bool:
    parts = rel.split("/")
    if any(p.startswith(".") or p in ("__pycache__", "build") for p in parts[:-1]):
        return False
    return PurePosixPath(rel).suffix in SNAPSHOT_SUFFIXES


def _add(files: dict[str, str], rel: str, blob: bytes, total: list[int]) -> None:
    if len(blob) > MAX_MEMBER_BYTES:
        raise PayloadError(f"archive member {rel!r} is larger than {MAX_MEMBER_BYTES} bytes", 413)
    total[0] += len(blob)
    if total[0] > MAX_BYTES or len(files) >= MAX_FILES:
        raise PayloadError(
            f"the archive holds more than {MAX_FILES} files or {MAX_BYTES} bytes", 413
        )
    try:
        files[rel] = normalise_text(blob.decode("utf-8"))
    except UnicodeDecodeError:
        raise PayloadError(f"archive member {rel!r} is not UTF-8 text") from None


def _count(seen: list[int], size: int) -> None:
    """Bound the work an archive can cause, skipped members included (a decompression bomb)."""
    seen[0] += 1
    seen[1] += size
    if seen[0] > MAX_MEMBERS or seen[1] > MAX_DECLARED_BYTES:
        raise PayloadError(
            f"the archive has more than {MAX_MEMBERS} members or {MAX_DECLARED_BYTES} bytes", 413
        )


def _read_tar(data: bytes) -> dict[str, str]:
    files: dict[str, str] = {}
    total = [0]
    seen = [0, 0]
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
            for member in archive:
                _count(seen, member.size)
                rel = _member_path(member.name)
                if member.issym() or member.islnk():
                    raise PayloadError(f"archive member {member.name!r} is a link")
                if member.isdev() or member.isfifo():
                    raise PayloadError(f"archive member {member.name!r} is a device or a fifo")
                if member.isdir() or rel is None:
                    continue
                if not member.isfile():
                    raise PayloadError(f"archive member {member.name!r} is not a regular file")
                if member.size > MAX_MEMBER_BYTES:
                    raise PayloadError(
                        f"archive member {member.name!r} is larger than {MAX_MEMBER_BYTES} bytes",
                        413,
                    )
                if not _keep(rel):
                    continue
                handle = archive.extractfile(member)
                _add(files, rel, handle.read() if handle else b"", total)
    except (tarfile.TarError, EOFError, OSError) as err:
        raise PayloadError(f"the archive cannot be read: {err}") from None
    return files


def _read_zip(data: bytes) -> dict[str, str]:
    files: dict[str, str] = {}
    total = [0]
    seen = [0, 0]
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                _count(seen, info.file_size)
                rel = _member_path(info.filename)
                mode = info.external_attr >> 16
                if mode and (mode & 0o170000) not in (0, 0o100000, 0o040000):
                    raise PayloadError(f"archive member {info.filename!r} is a link or a device")
                if info.is_dir() or rel is None:
                    continue
                if info.file_size > MAX_MEMBER_BYTES:
                    raise PayloadError(
                        f"archive member {info.filename!r} is larger than {MAX_MEMBER_BYTES} bytes",
                        413,
                    )
                if not _keep(rel):
                    continue
                with archive.open(info) as handle:
                    _add(files, rel, handle.read(MAX_MEMBER_BYTES + 1), total)
    except (zipfile.BadZipFile, OSError) as err:
        raise PayloadError(f"the archive cannot be read: {err}") from None
    return files
