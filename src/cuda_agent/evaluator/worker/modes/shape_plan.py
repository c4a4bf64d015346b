"""The ``shape_plan`` mode: describe a problem at several sizes, without computing anything.

For each problem source of ``req.batch`` (``{"id", "source"}``, the first one usually the
problem as evaluated, the others its size variants) it reports the constructor arguments, the
model's state (names, shapes, dtypes), the inputs (shapes and dtypes, or values), the output's
structure and shapes and the bytes all of these take; or why the reference does not run at
that size. Everything is built on the meta device (no memory, no compute); when an op has no
meta kernel the reference runs for real on the device, if its inputs and state fit the memory
budget. The record also carries that budget: the free device memory, or the host's available
memory on the cpu backend.

Only problem code runs here (never a candidate's). Not here: choosing the variants
(``problems/variants.py``) or verifying a candidate on them (``evaluator/checks/shapes.py`` runs the
``evaluate`` mode once per size).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import torch

from cuda_agent.core.records import ShapePlanRecord
from cuda_agent.evaluator.worker.device import Device, make_device
from cuda_agent.evaluator.worker.modules import describe_exception
from cuda_agent.evaluator.worker.precision import apply_precision
from cuda_agent.evaluator.worker.protocol import ResultChannel, WorkerRequest
from cuda_agent.evaluator.worker.reference import (
    PROBLEM_FILE,
    ProblemFailure,
    build_reference,
    call_problem,
    load_problem_module,
)
from cuda_agent.evaluator.worker.tensors import iter_tensors

META = torch.device("meta")


def run(req: WorkerRequest, channel: ResultChannel) -> ShapePlanRecord:
    apply_precision(req.settings.precision)
    device = make_device(req.settings.backend, req.settings.cpu_threads)
    budget = memory_budget(device)
    plans = []
    with torch.no_grad():  # scoped, so that calling it in-process leaves autograd alone
        for item in req.batch:
            plan = plan_source(str(item["source"]), req.seed, device, budget)
            plans.append({"id": item["id"], **plan})
    return ShapePlanRecord(ok=True, plans=plans, memory_bytes=budget, device=device.info())


def memory_budget(device: Device) -> int:
    """Bytes free for tensors: the device's free memory, or the host's available memory."""
    if device.name == "cuda":
        return int(torch.cuda.mem_get_info(device.torch_device)[0])
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def plan_source(source: str, seed: int, device: Device, budget: int) -> dict[str, Any]:
    """The description of one problem source (see the module docstring)."""
    try:
        module = load_problem_module(source)
        init_args = call_problem(module.get_init_inputs, "get_init_inputs", seed=seed)
        if not isinstance(init_args, list | tuple):
            raise ProblemFailure(f"get_init_inputs() returned {type(init_args).__name__}")
        with META:
            model = _construct(module.Model, list(init_args))
            inputs = call_problem(module.get_inputs, "get_inputs", seed=seed)
        inputs = _checked_inputs(inputs)
    except ProblemFailure as err:
        return {"ok": False, "error": str(err)}
    state = {name: _tensor_facts(t) for name, t in model.state_dict().items()}
    facts: dict[str, Any] = {
        "init_args": [_jsonable(a) for a in init_args],
        "inputs": [
            _tensor_facts(x) if isinstance(x, torch.Tensor) else {"value": x} for x in inputs
        ],
        "state": state,
        "bytes": {"inputs": _bytes(inputs), "state": _bytes(list(model.state_dict().values()))},
    }
    try:
        with META:
            output = model(*inputs)
        facts["ran_on"] = "meta"
    except Exception as err:  # an op without a meta kernel, or a real error of the reference
        needed = facts["bytes"]["inputs"] + facts["bytes"]["state"]
        if needed > budget:
            reason = describe_exception(err, (PROBLEM_FILE,))
            return {"ok": False, "error": f"on the meta device: {reason}", **facts}
        try:
            output = _run_for_real(source, seed, device)
        except ProblemFailure as failure:
            return {"ok": False, "error": str(failure), **facts}
        facts["ran_on"] = device.name
    facts["output"] = describe_output(output)
    facts["bytes"]["outputs"] = _bytes(output)
    return {"ok": True, **facts}


def describe_output(output: Any) -> dict[str, Any]:
    """``{"kind": "tensor" | "tuple" | "list" | "other", "tensors": [...]}``."""
    if isinstance(output, torch.Tensor):
        return {"kind": "tensor", "tensors": [_tensor_facts(output)]}
    if isinstance(output, tuple | list) and all(isinstance(t, torch.Tensor) for t in output):
        kind = "tuple" if isinstance(output, tuple) else "list"
        return {"kind": kind, "tensors": [_tensor_facts(t) for t in output]}
    return {"kind": "other", "type": type(output).__name__, "tensors": []}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _construct(factory: Any, init_args: list[Any]) -> torch.nn.Module:
    try:
        model = factory(*init_args)
    except Exception as err:
        message = describe_exception(err, (PROBLEM_FILE,))
        raise ProblemFailure(f"Model(*get_init_inputs()) failed: {message}") from None
    if not isinstance(model, torch.nn.Module):
        raise ProblemFailure(f"Model(*get_init_inputs()) returned {type(model).__name__}")
    return model


def _checked_inputs(inputs: Any) -> list[Any]:
    if not isinstance(inputs, list | tuple):
        raise ProblemFailure(f"get_inputs() returned {type(inputs).__name__}, not a list")
    for i, value in enumerate(inputs):
        if not isinstance(value, torch.Tensor | int | float | bool):
            raise ProblemFailure(f"get_inputs()[{i}] is a {type(value).__name__}")
    return list(inputs)


def _run_for_real(source: str, seed: int, device: Device) -> Any:
    ref = build_reference(source, seed, device, verify_trials=1, timing_sets=0)
    try:
        output = ref.model(*ref.verify_sets[0])
        device.synchronize()
    except Exception as err:
        message = describe_exception(err, (PROBLEM_FILE,))
        raise ProblemFailure(f"Model.forward failed: {message}") from None
    return output


def _tensor_facts(t: torch.Tensor) -> dict[str, Any]:
    return {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}


def _bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in iter_tensors(value))


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "dtype": dtype_name(value.dtype)}
    return repr(value)
