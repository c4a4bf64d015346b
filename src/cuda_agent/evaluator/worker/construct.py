"""Build a problem's or candidate's ``nn.Module`` with its tensors born on the evaluation device.

Constructing a large model on the host and then moving it is slow: the worker runs torch with
one CPU thread, so initialising gigabytes of weights there takes tens of seconds (KernelBench
level 3's wide MLPs), and the copy costs more. Under the device's factory context every tensor
the constructor makes lands on the device directly. A constructor that cannot run that way
(it calls ``.numpy()`` on a fresh tensor, say) is built again on the host, from the same seed,
and moved, so no problem is lost to the shortcut.

This module only builds; loading weights, checking them and reporting failures belong to the
callers (``reference.py`` and ``candidate.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.tensors import clone_nested


def build_on_device(
    factory: Callable[..., Any],
    init_args: list[Any],
    seed: int,
    device: Device,
    on_host: bool = False,
) -> tuple[Any, bool]:
    """``factory(*init_args)`` seeded with ``seed``, on ``device``; (module, built_on_host).

    The first attempt runs under ``device.factory_context()``. If it raises, the constructor
    runs once more without it (seeded alike) and the result is moved; an error from that second
    attempt propagates to the caller. ``on_host`` goes to the host path directly (ModelNew is
    built the way Model was, so that the same seed draws from the same generator). A
    constructor that returns something other than a module is returned as is, for the caller
    to reject.
    """
    if not on_host or device.name == "cpu":
        torch.manual_seed(seed)
        try:
            with device.factory_context():
                return _moved(factory(*clone_nested(init_args)), device), False
        except Exception:  # any failure means: try the host path
            if device.name == "cpu":
                raise
    torch.manual_seed(seed)
    return _moved(factory(*clone_nested(init_args)), device), True


def _moved(module: Any, device: Device) -> Any:
    if isinstance(module, torch.nn.Module):
        return module.to(device.torch_device)
    return module
