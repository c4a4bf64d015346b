"""Import a candidate solution inside the worker and build its ``ModelNew``.

Both shapes are supported: a KernelBench single file (its ``load_inline`` calls go through the
harness shim) and a CUDA-Agent workdir (``model_new.py`` imports ``cuda_extension``, which the
parent already built from ``kernels/`` and the harness's binding files). The candidate's folder
is a private snapshot made by the parent, so the live workspace cannot change mid-evaluation.

``ModelNew`` is built from the reference's seed, the way the reference was built, and receives
its weights as the policy says (``weights.py``). Whatever candidate code raises at import, in
``__init__`` or (through ``failed_build``, used by ``verify.py``) in ``forward``: if a build
failed, the verdict is stage ``build`` with the compiler's diagnostics, the same text a build
before the worker gives.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cuda_agent.evaluator.worker import triton_launches
from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.modules import describe_exception, module_from_source
from cuda_agent.evaluator.worker.policies import PolicyRules
from cuda_agent.evaluator.worker.protocol import WorkerRequest
from cuda_agent.evaluator.worker.reference import PROBLEM_FILE, Reference
from cuda_agent.evaluator.worker.shim import BuildShim, diagnostics_of, private_temp_roots
from cuda_agent.evaluator.worker.weights import Transfer, WeightsMismatch, transfer

WORKDIR_EXTENSION = "cuda_extension"


class CandidateFailure(Exception):
    """The candidate could not be imported or instantiated; ``stage`` says where."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class ProblemNamespace:
    """What a single-file solution may take from the problem's file (``PolicyRules.
    reference_namespace``): ``source`` executed before the solution in its namespace (None
    where the policy gives a module of its own), ``names`` what that file defines and imports
    (for the verdict's hint where they are not given)."""

    source: str | None
    names: frozenset[str]


def problem_namespace(req: WorkerRequest, ref: Reference, decided: PolicyRules) -> ProblemNamespace:
    names = frozenset(k for k in vars(ref.module) if not k.startswith("__"))
    given = decided.reference_namespace and req.solution_kind != "workdir"
    return ProblemNamespace(req.problem_source if given else None, names)


def namespace_hint(err: BaseException, problem: ProblemNamespace | None) -> str:
    """For a NameError on a name the problem's file defines, where the solution ran in a module
    of its own: why, and what to do."""
    name = getattr(err, "name", None)
    if problem is None or problem.source is not None or not isinstance(err, NameError):
        return ""
    if name not in problem.names:
        return ""
    return (
        f" (`{name}` is defined by the problem's file, not by the solution: under this policy "
        "a solution is a module of its own and must import or define what it uses; "
        "KernelBench's evaluator, and the kernelbench policy, run it in the problem's namespace)"
    )


def import_candidate(
    kind: str,
    root: Path,
    entry: str,
    prebuilt: str | None,
    shim: BuildShim,
    problem: ProblemNamespace | None = None,
) -> type:
    """Execute the candidate's entry file and return its ``ModelNew`` class (after the
    problem's file, in the same namespace, where ``problem.source`` is given)."""
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
        given = problem.source if problem is not None else None  # None for a workdir
        preamble = (given, PROBLEM_FILE) if given is not None else None
        module = module_from_source(
            source,
            str(entry_path),
            name="model_new" if kind == "workdir" else None,
            register=kind == "workdir",
            preamble=preamble,
        )
    except BaseException as err:
        message = failed_build(shim, err, files)
        if message is not None:
            raise CandidateFailure("build", message) from None
        described = describe_exception(err, files) + namespace_hint(err, problem)
        raise CandidateFailure("load", f"importing {entry} failed: {described}") from None
    model_new = getattr(module, "ModelNew", None)
    if not isinstance(model_new, type) or not issubclass(model_new, torch.nn.Module):
        raise CandidateFailure("load", f"{entry} defines no `class ModelNew(nn.Module)`")
    return model_new


def request_shim(req: WorkerRequest) -> BuildShim:
    """The build shim for the request's solution (not installed yet): its builds, the build
    failures the parent already saw, the sanitizer the request names; with Triton's launch
    hook when the solution uses Triton (imported now, before any snapshot of the harness's
    state: importing Triton is the harness's doing, not the candidate's)."""
    root = Path(req.solution_root)
    shim = BuildShim(
        req.settings.backend,
        root,
        req.settings.build_timeout_s,
        roots=private_temp_roots(root),
        known_failures=req.known_build_failures,
        sanitizer=req.sanitizer,
    )
    if req.uses_triton:
        shim.triton = triton_launches.install(
            shim.usage, req.settings.backend == "cpu", root.parent / "private" / "triton"
        )
    return shim


def failed_build(shim: BuildShim, err: BaseException, files: tuple[str, ...]) -> str | None:
    """The verdict text when ``err`` is (or follows) a failed build, else None.

    ``err`` raised by the shim (or caused by it) gives that build's diagnostics. Another error
    after a build failure that the solution caught (its fallback then failed) gives the build's
    diagnostics first, then the later error.
    """
    own = diagnostics_of(err)
    if own is not None:
        return own
    if shim.failure is None:
        return None
    return (
        f"{shim.failure}\n(the solution caught this build error, then failed: "
        f"{describe_exception(err, files)})"
    )


@dataclass
class Instance:
    """ModelNew built and given weights; ``transfer`` says whether Model's weights arrived."""

    model: torch.nn.Module
    transfer: Transfer
    built_on_host: bool


def instantiate(
    model_new: type,
    init_args: list[Any],
    init_seed: int,
    state: dict[str, torch.Tensor],
    device: Device,
    files: tuple[str, ...],
    shim: BuildShim,
    strict_weights: bool = True,
    on_host: bool = False,
) -> Instance:
    """``ModelNew(*get_init_inputs())`` built on the device from ``init_seed`` (on the host
    first when ``on_host``: the reference was built there), then given the reference's weights
    (strictly, or when names and shapes match; see ``weights.py``)."""
    try:
        model, built_on_host = build_on_device(model_new, init_args, init_seed, device, on_host)
    except BaseException as err:
        message = failed_build(shim, err, files)
        if message is not None:
            raise CandidateFailure("build", message) from None
        raise CandidateFailure(
            "load", f"ModelNew(*get_init_inputs()) failed: {describe_exception(err, files)}"
        ) from None
    if not isinstance(model, torch.nn.Module):
        raise CandidateFailure(
            "load", f"ModelNew(*get_init_inputs()) returned {type(model).__name__}"
        )
    try:
        moved = transfer(model, state, strict_weights)
    except WeightsMismatch as err:
        raise CandidateFailure(
            "load", f"ModelNew's parameters must match Model's (strict load_state_dict): {err}"
        ) from None
    try:
        return Instance(model.to(device.torch_device), moved, built_on_host)
    except BaseException as err:
        raise CandidateFailure(
            "load",
            f"moving ModelNew to {device.torch_device} failed: {describe_exception(err, files)}",
        ) from None


def imported_candidate(
    req: WorkerRequest, ref: Reference, shim: BuildShim, decided: PolicyRules
) -> tuple[type, tuple[str, ...]]:
    """The request's ``ModelNew`` class, imported as ``evaluate`` imports it, and the
    solution's Python files (for the frames an error shows)."""
    root = Path(req.solution_root)
    model_new = import_candidate(
        req.solution_kind,
        root,
        req.solution_entry,
        req.prebuilt_module,
        shim,
        problem_namespace(req, ref, decided),
    )
    return model_new, tuple(str(p) for p in root.rglob("*.py"))


def instance_for(
    model_new: type,
    ref: Reference,
    device: Device,
    files: tuple[str, ...],
    shim: BuildShim,
    decided: PolicyRules,
) -> torch.nn.Module:
    """``ModelNew`` built for ``ref`` (its init arguments, seed and weights) as ``evaluate``
    builds it."""
    return instantiate(
        model_new,
        ref.init_args,
        ref.init_seed,
        ref.state,
        device,
        files,
        shim,
        strict_weights=decided.strict_weights,
        on_host=ref.built_on_host,
    ).model


def built_candidate(
    req: WorkerRequest, ref: Reference, device: Device, shim: BuildShim, decided: PolicyRules
) -> torch.nn.Module:
    """Import the request's solution and build its ``ModelNew`` the way ``evaluate`` does
    (for the modes that only run it: ``ncu_profile``, ``memory_check``)."""
    model_new, files = imported_candidate(req, ref, shim, decided)
    return instance_for(model_new, ref, device, files, shim, decided)
