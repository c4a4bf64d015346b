"""Import a candidate solution inside the worker and build its ``ModelNew``.

Both shapes are supported: a KernelBench single file (its ``load_inline`` calls go through the
harness shim) and a CUDA-Agent workdir (``model_new.py`` imports ``cuda_extension``, which the
parent already built from ``kernels/`` and the harness's binding files). The candidate's folder
is a private snapshot made by the parent, so the live workspace cannot change mid-evaluation.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch

from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.modules import describe_exception, module_from_source
from cuda_agent.evaluator.worker.shim import BuildShim, CandidateBuildFailed

WORKDIR_EXTENSION = "cuda_extension"


class CandidateFailure(Exception):
    """The candidate could not be imported or instantiated; ``stage`` says where."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


def import_candidate(
    kind: str, root: Path, entry: str, prebuilt: str | None, shim: BuildShim
) -> type:
    """Execute the candidate's entry file and return its ``ModelNew`` class."""
    entry_path = root / entry
    os.chdir(root)
    sys.path.insert(0, str(root))
    if kind == "workdir" and prebuilt:
        try:
            extension = shim.load_prebuilt(WORKDIR_EXTENSION, Path(prebuilt))
        except ImportError as err:  # e.g. an undefined symbol: a link problem in kernels/
            raise CandidateFailure("build", f"{WORKDIR_EXTENSION} does not import: {err}") from None
        sys.modules[WORKDIR_EXTENSION] = extension
    files = tuple(str(p) for p in root.rglob("*.py"))
    try:
        source = entry_path.read_text(encoding="utf-8")
        module = module_from_source(
            source,
            str(entry_path),
            name="model_new" if kind == "workdir" else None,
            register=kind == "workdir",
        )
    except CandidateBuildFailed as err:
        raise CandidateFailure("build", str(err)) from None
    except BaseException as err:
        if shim.failure:
            raise CandidateFailure("build", shim.failure) from None
        raise CandidateFailure(
            "load", f"importing {entry} failed: {describe_exception(err, files)}"
        ) from None
    if shim.failure:
        raise CandidateFailure("build", shim.failure)
    model_new = getattr(module, "ModelNew", None)
    if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
        raise CandidateFailure("load", f"{entry} defines no `class ModelNew(nn.Module)`")
    return model_new


def instantiate(
    model_new: type,
    init_args: list[Any],
    init_seed: int,
    state: dict[str, torch.Tensor],
    device: Device,
    entry: str,
    files: tuple[str, ...],
) -> torch.nn.Module:
    """``ModelNew(*get_init_inputs())`` built on the device, with the reference's weights loaded
    strictly (see ``construct.py`` for how it is built)."""
    try:
        model, _ = build_on_device(model_new, init_args, init_seed, device)
    except BaseException as err:
        raise CandidateFailure(
            "load", f"ModelNew(*get_init_inputs()) failed: {describe_exception(err, files)}"
        ) from None
    try:
        model.load_state_dict({k: v.clone() for k, v in state.items()}, strict=True)
    except RuntimeError as err:
        first = str(err).strip().splitlines()
        detail = " ".join(line.strip() for line in first[:3])
        raise CandidateFailure(
            "load",
            "ModelNew's parameters must match Model's (strict load_state_dict): " + detail[:800],
        ) from None
    try:
        return model.to(device.torch_device).eval()
    except BaseException as err:
        raise CandidateFailure(
            "load",
            f"moving ModelNew to {device.torch_device} failed: {describe_exception(err, files)}",
        ) from None
