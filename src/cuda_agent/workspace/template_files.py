"""Access to the workspace template shipped with the package (SKILL.md, binding files...)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

HARNESS_BINDING_FILES = ("binding.cpp", "binding_registry.h")


def template_root() -> Path:
    return Path(str(resources.files("cuda_agent.workspace") / "template"))


def triton_template_root() -> Path:
    """The Triton variant: SKILL.md, ``model_new.py``'s header, ``kernels/README.md``."""
    return Path(str(resources.files("cuda_agent.workspace") / "template_triton"))


def harness_binding_files() -> dict[str, str]:
    """The fixed binding files, always taken from the harness (never from a workdir)."""
    root = template_root()
    return {name: (root / name).read_text(encoding="utf-8") for name in HARNESS_BINDING_FILES}
