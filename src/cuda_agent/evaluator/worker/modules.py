"""Load Python source text as a fresh module object, and describe exceptions in one line.

The pristine reference is loaded from the request's text under a random module name, before
any candidate code runs, so the candidate cannot shadow or rebind it through imports.
"""

from __future__ import annotations

import secrets
import sys
import traceback
import types
from pathlib import Path


def module_from_source(
    source: str,
    filename: str,
    name: str | None = None,
    register: bool = False,
    preamble: tuple[str, str] | None = None,
) -> types.ModuleType:
    """Execute ``source`` as a new module; exceptions propagate to the caller.
    ``preamble``: (source, filename) executed first in the same namespace (KernelBench's
    one dict for the problem's file and the solution's)."""
    module_name = name or f"_cuda_agent_mod_{secrets.token_hex(6)}"
    module = types.ModuleType(module_name)
    module.__file__ = filename
    if register:
        sys.modules[module_name] = module
    if preamble is not None:
        exec(compile(preamble[0], preamble[1], "exec"), module.__dict__)
        module.__file__ = filename
    code = compile(source, filename, "exec")
    exec(code, module.__dict__)
    return module


def describe_exception(err: BaseException, files: tuple[str, ...] = ()) -> str:
    """``model_new.py:12: NameError: name 'x' is not defined`` (innermost frame in ``files``)."""
    where = ""
    frames = traceback.extract_tb(err.__traceback__)
    names = {Path(f).name for f in files}
    for frame in reversed(frames):
        if frame.filename in files or Path(frame.filename).name in names:
            where = f"{Path(frame.filename).name}:{frame.lineno}: "
            break
    message = str(err).strip().splitlines()
    text = message[0] if message else ""
    if len(message) > 1:
        text += " ..."
    return f"{where}{type(err).__name__}: {text}"[:2000]
