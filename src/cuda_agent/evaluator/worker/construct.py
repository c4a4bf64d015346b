"""Build a problem's or candidate's ``nn.Module`` the way KernelBench does: seeded, on the host.

KernelBench seeds the generators, runs the constructor on the host and moves the module to the
GPU, so a module's random initial weights come from the CPU generator. A candidate that makes
its parameters itself (``torch.Tensor(shape)`` and the same ``nn.init`` calls as the module it
replaces) gets the reference's exact weights only if both are built that way: construction under
the device's factory context draws from the CUDA generator instead, and such a candidate would
be compared at other weights (the weights are not transferred when names differ).

Host construction is slow for very large models (the worker runs torch on one CPU thread: about
70 million elements a second, KernelBench level 3's widest MLPs would take tens of seconds). So a
module is first built under the device's factory context (tensors born on the device, fast);
when it holds at most ``HOST_BUILD_MAX_ELEMENTS`` elements it is built again on the host from
the same seed and moved, and that host-built module is the one used. A larger module keeps its
device construction (``Construction.on_host`` False: the caller notes it). A constructor that
cannot run under the factory context (it calls ``.numpy()`` on a fresh tensor, say) is built on
the host directly. ``on_host=True`` skips the device attempt (ModelNew is built the way Model
was, so the same seed draws from the same generator).

This module only builds; loading weights, checking them and reporting failures belong to the
callers (``reference.py`` and ``candidate.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from cuda_agent.evaluator.worker.device import Device
from cuda_agent.evaluator.worker.tensors import clone_nested

HOST_BUILD_MAX_ELEMENTS = 64 * 1024 * 1024  # about a second of host initialisation


def build_on_device(
    factory: Callable[..., Any],
    init_args: list[Any],
    seed: int,
    device: Device,
    on_host: bool = False,
) -> tuple[Any, bool]:
    """``factory(*init_args)`` seeded with ``seed``, placed on ``device``; (module, built_on_host).

    On the cpu backend the constructor runs once, in place. Otherwise see the module
    docstring: built on the host (KernelBench's way) unless the module is larger than
    ``HOST_BUILD_MAX_ELEMENTS``. An error of the host construction propagates to the caller.
    A constructor that returns something other than a module is returned as is, for the
    caller to reject.
    """
    if device.name == "cpu":
        torch.manual_seed(seed)
        with device.factory_context():
            return _moved(factory(*clone_nested(init_args)), device), False
    if not on_host:
        torch.manual_seed(seed)
        try:
            with device.factory_context():
                built = factory(*clone_nested(init_args))
        except Exception:  # any failure means: build it on the host
            built = None
        if built is not None and _elements(built) > HOST_BUILD_MAX_ELEMENTS:
            return _moved(built, device), False
        del built
    torch.manual_seed(seed)
    return _moved(factory(*clone_nested(init_args)), device), True


def _elements(module: Any) -> int:
    """Elements in a module's parameters and buffers (0 for something that is not a module)."""
    if not isinstance(module, torch.nn.Module):
        return 0
    return sum(t.numel() for t in (*module.parameters(), *module.buffers()))


def _moved(module: Any, device: Device) -> Any:
    if isinstance(module, torch.nn.Module):
        return module.to(device.torch_device)
    return module
