"""Import KernelBench's evaluator from a read-only checkout, and say which one it was.

``<kb>/src`` (or ``<kb>`` for the older flat layout) goes on ``sys.path``; the LLM clients that
KernelBench's utils import at module level get inert stand-ins when they are not installed.
Nothing here runs an evaluation or touches a GPU (``env_info`` only asks torch what it sees).
"""

from __future__ import annotations

import hashlib
import importlib.util
import platform
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _stub_module(name: str, attrs: dict[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__dict__["__kbpeer_stub__"] = True
    sys.modules[name] = mod
    return mod


def _unavailable(what: str) -> Callable[..., Any]:
    def fail(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError(f"{what} is a stand-in registered by kernelbench_peer.py")

    return fail


def kb_layout(kb: Path) -> str | None:
    """'package' (``src/kernelbench/eval.py``, KernelBench today), 'flat' (``src/eval.py``,
    older trees and hzeng2000's fork with the triton backend) or None (no checkout)."""
    src = kb.resolve() / "src"
    if (src / "kernelbench" / "eval.py").is_file():
        return "package"
    if (src / "eval.py").is_file() and (src / "__init__.py").is_file():
        return "flat"
    return None


def import_kb(kb: Path) -> dict[str, Any]:
    """Import KernelBench's evaluator from the checkout; returns its modules and the stubs used."""
    src = kb.resolve() / "src"
    layout = kb_layout(kb)
    if layout is None:
        raise SystemExit(f"no KernelBench checkout at {kb} (expected {src}/kernelbench/eval.py)")
    root = str(src) if layout == "package" else str(kb.resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    stubs = []
    # Only used by kernelbench.utils.query_server (LLM calls), imported at module level.
    if importlib.util.find_spec("openai") is None:
        _stub_module("openai", {"OpenAI": _unavailable("openai.OpenAI")})
        stubs.append("openai")
    if importlib.util.find_spec("litellm") is None:
        _stub_module("litellm", {"completion": _unavailable("litellm.completion")})
        stubs.append("litellm")
    if importlib.util.find_spec("dotenv") is None:  # the wheel is shipped; this is a fallback
        _stub_module("dotenv", {"load_dotenv": lambda *a, **k: False})
        stubs.append("dotenv")
    if layout == "flat":
        # Older trees (and forks such as hzeng2000's, with the triton backend): the package
        # is ``src`` itself; utils.py also imports transformers at module level.
        if importlib.util.find_spec("transformers") is None:
            _stub_module("transformers", {"AutoTokenizer": _unavailable("AutoTokenizer")})
            stubs.append("transformers")
        kb_eval = importlib.import_module("src.eval")
        kb_timing = importlib.import_module("src.timing")
        kb_utils = importlib.import_module("src.utils")
        kb_static = None  # no kernel_static_checker in those trees
    else:
        kb_eval = importlib.import_module("kernelbench.eval")
        kb_static = importlib.import_module("kernelbench.kernel_static_checker")
        kb_timing = importlib.import_module("kernelbench.timing")
        kb_utils = importlib.import_module("kernelbench.utils")
    return {
        "eval": kb_eval,
        "timing": kb_timing,
        "utils": kb_utils,
        "static": kb_static,
        "stubs": stubs,
    }


def kb_provenance(kb: Path, stubs: list[str] | None = None) -> dict[str, Any]:
    digest = hashlib.sha256()
    for rel in ("src/kernelbench/eval.py", "src/kernelbench/timing.py") + (
        ("src/eval.py", "src/timing.py") if kb_layout(kb) == "flat" else ()
    ):
        path = kb / rel
        if path.is_file():
            digest.update(path.read_bytes())
    info: dict[str, Any] = {"path": str(kb.resolve()), "eval_timing_sha256": digest.hexdigest()}
    if stubs is not None:
        info["stubs"] = stubs
    return info


def env_info() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "host": platform.node()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception as exc:  # pragma: no cover - informational only
        info["torch_error"] = repr(exc)
    for name in ("pydantic", "pydantic_core", "typing_extensions", "triton", "numpy"):
        try:
            from importlib.metadata import version

            info[name] = version(name.replace("_", "-"))
        except Exception:
            info[name] = None
    return info
