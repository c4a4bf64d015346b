"""The pristine reference: the problem module, its model, and every input set, made up front.

Everything here runs before any candidate code is imported: the problem is loaded from the
request's text (never from the candidate's folder), the reference model is initialised from a
seed derived from the evaluation's hidden seed, and all verification and timing inputs are
drawn and fingerprinted. A candidate that later rebinds the problem's constants (to shrink
inputs) or mutates these tensors is detected, not obeyed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from cuda_agent.evaluator.worker.construct import build_on_device
from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.device_memory import raise_if_contended
from cuda_agent.evaluator.worker.modules import describe_exception, module_from_source
from cuda_agent.evaluator.worker.tensors import (
    derive_seed,
    fingerprint_nested,
)

PROBLEM_FILE = "model.py"


class ProblemFailure(Exception):
    """The reference problem itself is broken (its code raised or returned bad values)."""


@dataclass
class Reference:
    module: Any
    model: torch.nn.Module
    init_args: list[Any]
    init_seed: int
    state: dict[str, torch.Tensor]
    state_fingerprint: list[tuple[int, ...]]
    verify_sets: list[list[Any]] = field(default_factory=list)
    timing_sets: list[list[Any]] = field(default_factory=list)
    input_fingerprints: list[list[tuple[int, ...]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    built_on_host: bool = False  # Model built on the host and moved (construct.py)
    # state entries the reference's own forward changes (BatchNorm's running statistics in
    # training mode): left out of the fingerprint by ``exclude_own_updates``
    own_updates: tuple[str, ...] = ()

    @property
    def module_mode(self) -> str:
        """``train`` when any submodule is in training mode (as constructed), else ``eval``."""
        return "train" if any(m.training for m in self.model.modules()) else "eval"

    def all_sets(self) -> list[list[Any]]:
        return [*self.verify_sets, *self.timing_sets]

    def timing_inputs(self) -> list[list[Any]]:
        """The sets timing rotates over: its own, or the verification sets when memory allowed
        none of its own (see ``_affordable_sets``)."""
        return self.timing_sets or self.verify_sets

    def inputs_intact(self) -> bool:
        return [fingerprint_nested(s) for s in self.all_sets()] == self.input_fingerprints

    def set_intact(self, index: int) -> bool:
        """Whether input set ``index`` of ``all_sets()`` is unchanged (one set: cheaper)."""
        return fingerprint_nested(self.all_sets()[index]) == self.input_fingerprints[index]

    def weights_intact(self) -> bool:
        return self._fingerprint() == self.state_fingerprint

    def exclude_own_updates(self) -> None:
        """After a call of the reference: the state entries that call changed are the ones its
        forward updates by design (BatchNorm's running statistics and batch count in training
        mode, the mode KernelBench runs modules in). They change on every call, so they leave
        the fingerprint; every other parameter and buffer stays watched."""
        current = self.model.state_dict()
        self.own_updates = tuple(
            k for k, v in current.items() if k in self.state and not torch.equal(v, self.state[k])
        )
        self.state_fingerprint = self._fingerprint()

    def _fingerprint(self) -> list[tuple[int, ...]]:
        skip = set(self.own_updates)
        state = self.model.state_dict()
        return fingerprint_nested([v for k, v in state.items() if k not in skip])


def load_problem_module(source: str) -> Any:
    try:
        module = module_from_source(source, PROBLEM_FILE)
    except Exception as err:
        raise ProblemFailure(
            f"the problem does not import: {describe_exception(err, (PROBLEM_FILE,))}"
        ) from None
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise ProblemFailure(f"the problem defines no {name}")
    return module


def build_reference(
    source: str, seed: int, device: Device, verify_trials: int, timing_sets: int
) -> Reference:
    """The reference model, its weights' copy and every input set, all in the harness's own
    device memory (``Device.harness_memory``: apart from the candidate's allocations)."""
    module = load_problem_module(source)
    with device.harness_memory():
        return _build(module, seed, device, verify_trials, timing_sets)


def _build(
    module: Any, seed: int, device: Device, verify_trials: int, timing_sets: int
) -> Reference:
    init_seed = derive_seed(seed, "init")
    init_args = call_problem(module.get_init_inputs, "get_init_inputs", seed=init_seed)
    if not isinstance(init_args, list | tuple):
        raise ProblemFailure(f"get_init_inputs() returned {type(init_args).__name__}, not a list")
    init_args = list(init_args)
    try:
        model, on_host = build_on_device(module.Model, init_args, init_seed, device)
    except Exception as err:
        raise_if_contended(err, "Model(*get_init_inputs())")
        raise ProblemFailure(
            f"Model(*get_init_inputs()) failed: {describe_exception(err, (PROBLEM_FILE,))}"
        ) from None
    if not isinstance(model, torch.nn.Module):
        raise ProblemFailure(f"Model(*get_init_inputs()) returned {type(model).__name__}")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ref = Reference(
        module=module,
        model=model,
        init_args=init_args,
        init_seed=init_seed,
        state=state,
        state_fingerprint=fingerprint_nested(list(model.state_dict().values())),
        built_on_host=on_host,
    )
    if not on_host and device.name != "cpu":
        ref.notes.append(
            "Model is large: it was built on the device, not on the host as KernelBench builds "
            "it, so its seeded initial weights differ from KernelBench's (they reach ModelNew "
            "by load_state_dict where the names and shapes match)"
        )
    first = draw_inputs(module, derive_seed(seed, "verify", 0), device)
    verify_trials, timing_sets = _affordable_sets(
        first, verify_trials, timing_sets, device, ref.notes
    )
    ref.verify_sets = [first] + [
        draw_inputs(module, derive_seed(seed, "verify", k), device) for k in range(1, verify_trials)
    ]
    ref.timing_sets = [
        draw_inputs(module, derive_seed(seed, "time", j), device) for j in range(timing_sets)
    ]
    ref.input_fingerprints = [fingerprint_nested(s) for s in ref.all_sets()]
    return ref


MEMORY_SHARE = 0.4  # of the free device memory, for the input sets held at once
MIN_VERIFY_SETS = 2


def _affordable_sets(
    first: list[Any], trials: int, wanted: int, device: Device, notes: list[str]
) -> tuple[int, int]:
    """(verification sets, timing sets) that fit in ``MEMORY_SHARE`` of free device memory.

    Every set is held for the whole evaluation (drawn before the candidate is imported, so
    its code cannot touch how they are made). When they do not all fit, timing first gets
    fewer sets of its own, then none (it rotates over the verification sets), then the
    verification trials shrink, to no fewer than ``MIN_VERIFY_SETS``; each cut is noted.
    """
    if device.name != "cuda":
        return trials, wanted
    per_set = sum(t.numel() * t.element_size() for t in first if isinstance(t, torch.Tensor))
    free, _ = torch.cuda.mem_get_info(device.torch_device)
    affordable = int(MEMORY_SHARE * free // max(per_set, 1))
    if affordable >= trials + wanted:
        return trials, wanted
    size = f"large inputs ({per_set / 2**30:.1f} GiB a set)"
    if affordable > trials:
        chosen = affordable - trials
        notes.append(f"{size}: {chosen} timing input set(s) instead of {wanted}")
        return trials, chosen
    verify = max(MIN_VERIFY_SETS, min(trials, affordable))
    notes.append(
        f"{size}: {verify} verification trial(s) instead of {trials}, and timing rotates "
        "over their inputs"
    )
    return verify, 0


def draw_inputs(module: Any, seed: int, device: Device) -> list[Any]:
    """``get_inputs()`` under ``seed``, created on (or moved to) the evaluation device."""
    with device.factory_context():
        inputs = call_problem(module.get_inputs, "get_inputs", seed=seed)
    if not isinstance(inputs, list | tuple):
        raise ProblemFailure(
            f"get_inputs() returned {type(inputs).__name__}, not a list of tensors"
        )
    inputs = list(inputs)
    if not any(isinstance(x, torch.Tensor) for x in inputs):
        raise ProblemFailure("get_inputs() returned no tensors")
    for i, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            if type(value) is not torch.Tensor:
                raise ProblemFailure(
                    f"get_inputs()[{i}] is a {type(value).__name__}, not a plain tensor"
                )
            inputs[i] = value.to(device.torch_device)
        elif not isinstance(value, int | float | bool):
            raise ProblemFailure(
                f"get_inputs()[{i}] is a {type(value).__name__}; inputs must be tensors or numbers"
            )
    return inputs


def call_problem(fn: Any, name: str, seed: int) -> Any:
    torch.manual_seed(seed)
    try:
        return fn()
    except Exception as err:
        raise_if_contended(err, f"{name}()")
        raise ProblemFailure(
            f"{name}() failed: {describe_exception(err, (PROBLEM_FILE,))}"
        ) from None
