"""The harness's secret key, and signatures made with it (HMAC-SHA256).

Caches that decide rewards (``baselines/``: torch.compile ratios; ``builds/``: compiled objects
and modules) are written by the harness and signed with a key that only the harness can read:
the key file is ``0600`` in a ``0700`` folder (unreadable to the sandbox user), and every
sandbox mode hides that folder (bubblewrap: an empty tmpfs; Landlock: no read right). An entry
whose signature does not check is treated as missing, so a forged entry is recomputed, never
used. Under isolation ``none`` a candidate can read the key: signatures then prove nothing,
which is why that mode must be asked for explicitly.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from cuda_agent.core.paths import cache_root

KEY_FILE = "hmac.key"
SIG_SUFFIX = ".sig"


def secret_dir() -> Path:
    return cache_root() / "secret"


SANDBOXED_ENV = "CUDA_AGENT_SANDBOXED"  # set in sandboxed processes: never create a key


class SecretUnavailable(RuntimeError):
    """This process cannot read the key (a sandboxed process: by design)."""


@functools.lru_cache(maxsize=4)
def _key(folder: str) -> bytes:
    path = Path(folder) / KEY_FILE
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if os.environ.get(SANDBOXED_ENV):
            raise SecretUnavailable("no key in this sandboxed process") from None
    except OSError as err:
        raise SecretUnavailable(f"the key is unreadable here: {err}") from None
    Path(folder).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    key = secrets.token_bytes(32)
    tmp = Path(folder) / f".{KEY_FILE}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(key)
    try:
        os.link(tmp, path)  # first writer wins; everyone then reads the same key
    except FileExistsError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return path.read_bytes()


def key() -> bytes:
    return _key(str(secret_dir()))


def available() -> bool:
    """True where this process can sign and check (the harness), False in a sandbox."""
    try:
        key()
    except SecretUnavailable:
        return False
    return True


def sign(data: bytes) -> str:
    return hmac.new(key(), data, hashlib.sha256).hexdigest()


def verify(data: bytes, signature: str) -> bool:
    return hmac.compare_digest(sign(data), signature or "")


def sign_record(record: dict[str, Any]) -> str:
    """The signature of a JSON-able record (canonical form: sorted keys, no spaces)."""
    return sign(json.dumps(record, sort_keys=True, separators=(",", ":")).encode())


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def seal_file(path: Path, entry: str | None = None) -> str:
    """Sign ``path``'s content (beside it, ``NAME.sig``); its sha256. ``entry``: the name of
    the cache folder the file will live in, when it is sealed before being moved there."""
    digest = file_digest(path)
    sig = path.with_name(path.name + SIG_SUFFIX)
    tmp = sig.with_name(f".{sig.name}.{secrets.token_hex(4)}")
    tmp.write_text(sign(_file_message(path, digest, entry)))
    os.chmod(tmp, 0o644)
    os.replace(tmp, sig)
    return digest


def sealed_digest(path: Path) -> str | None:
    """``path``'s sha256 when its seal checks, else None (missing, forged or changed)."""
    sig = path.with_name(path.name + SIG_SUFFIX)
    try:
        signature = sig.read_text().strip()
        digest = file_digest(path)
    except OSError:
        return None
    return digest if verify(_file_message(path, digest), signature) else None


def _file_message(path: Path, digest: str, entry: str | None = None) -> bytes:
    """What a file's seal signs: its cache entry (folder and name) and content, so a sealed
    file moved into another entry does not check there."""
    return f"{entry or path.parent.name}/{path.name}\0{digest}".encode()
