"""Which GPU kernels a call ran, on which streams, and which of them are the candidate's own.

``profile_call`` runs one call under the torch profiler (CUPTI) and returns every device
activity (kernels, copies, fills) with its stream and interval. ``candidate_kernel_names``
reads the kernel symbols of the candidate's compiled modules (``nm``), so a kernel counts as
custom because it lives in the candidate's binary, not because of its name; Triton kernels,
which live in no such module, count when the harness's own launch hook ran them
(``triton_launches``: the names of the kernels it launched).

Uses: the policy check (a custom kernel must run), the timing cross-check (device work of a
call, across all streams, must fit in the time the events measured), and the profile table.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class DeviceActivity:
    name: str
    stream: int
    start_us: float
    duration_us: float
    is_kernel: bool

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


def profile_call(fn: Callable[[], Any]) -> list[DeviceActivity]:
    """Device activities of one call of ``fn`` (the call is synchronised inside the window)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    activities = []
    for event in prof.profiler.kineto_results.events():
        if event.device_type() != torch.autograd.DeviceType.CUDA:
            continue
        name = event.name()
        kind_of = getattr(event, "activity_type", None)  # not in every torch version
        kind = str(kind_of()).lower() if callable(kind_of) else ""
        is_kernel = (
            "memcpy" not in kind
            and "memset" not in kind
            and not name.startswith(("Memcpy", "Memset"))
        )
        activities.append(
            DeviceActivity(
                name=name,
                stream=int(event.device_resource_id()),
                start_us=event.start_ns() / 1000.0,
                duration_us=event.duration_ns() / 1000.0,
                is_kernel=is_kernel,
            )
        )
    return sorted(activities, key=lambda a: a.start_us)


def busy_us(activities: Iterable[DeviceActivity]) -> float:
    """Length of the union of the activities' intervals (overlapping streams counted once)."""
    total, end = 0.0, float("-inf")
    for act in sorted(activities, key=lambda a: a.start_us):
        if act.start_us >= end:
            total += act.duration_us
            end = act.end_us
        elif act.end_us > end:
            total += act.end_us - end
            end = act.end_us
    return total


_PARAMS = re.compile(r"\(.*$")


def normalise_kernel_name(name: str) -> str:
    """``void ns::k<float>(float const*, int)`` -> ``ns::k<float>`` (comparable with ``nm -C``)."""
    name = name.strip()
    if name.startswith("void "):
        name = name[5:]
    return _PARAMS.sub("", name).strip()


def candidate_kernel_names(
    modules: Iterable[Path], launched: Iterable[str] = ()
) -> set[str] | None:
    """Demangled names of the functions defined in the candidate's modules, with ``launched``:
    the kernels the harness itself saw the candidate launch (Triton's, named by
    ``triton_launches``; they live in no module). None without nm when there are modules to
    read (then custom kernels cannot be told from torch's)."""
    modules = list(modules)
    names = {normalise_kernel_name(name) for name in launched}
    nm = shutil.which("nm")
    if nm is None:
        return names if not modules else None
    for module in modules:
        proc = subprocess.run(
            [nm, "-C", "--defined-only", str(module)], capture_output=True, text=True, check=False
        )
        for line in proc.stdout.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in ("T", "t", "W", "w"):
                names.add(normalise_kernel_name(parts[2]))
    return names


@dataclass
class KernelSummary:
    custom_us: float
    total_us: float
    custom_kernels: int
    kernels: int
    streams: int
    table: list[dict[str, Any]]

    @property
    def coverage(self) -> float:
        return self.custom_us / self.total_us if self.total_us > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "custom_us": round(self.custom_us, 3),
            "total_us": round(self.total_us, 3),
            "coverage": round(self.coverage, 4),
            "custom_kernels": self.custom_kernels,
            "kernels": self.kernels,
            "streams": self.streams,
            "table": self.table,
        }


def summarise_kernels(
    activities: list[DeviceActivity], custom: set[str] | None, top: int = 12
) -> KernelSummary:
    """Per-kernel totals (sorted by time) with a ``custom`` mark for the candidate's kernels."""
    rows: dict[str, dict[str, Any]] = {}
    custom_us = total_us = 0.0
    custom_count = kernel_count = 0
    for act in activities:
        total_us += act.duration_us
        is_custom = bool(act.is_kernel and custom and normalise_kernel_name(act.name) in custom)
        if act.is_kernel:
            kernel_count += 1
        if is_custom:
            custom_us += act.duration_us
            custom_count += 1
        row = rows.setdefault(
            act.name, {"name": act.name[:160], "calls": 0, "total_us": 0.0, "custom": is_custom}
        )
        row["calls"] += 1
        row["total_us"] += act.duration_us
    table = sorted(rows.values(), key=lambda r: -r["total_us"])[:top]
    for row in table:
        row["total_us"] = round(row["total_us"], 3)
    return KernelSummary(
        custom_us, total_us, custom_count, kernel_count, len({a.stream for a in activities}), table
    )
