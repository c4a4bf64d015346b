"""Which confinement step keeps CUDA from starting: cuInit and torch under each plan.

Usage: python benchmarks/confine_gpu_probe.py
Runs ``cuInit`` (and ``torch.cuda.device_count()``) through the confinement launcher under
plans that add one mechanism at a time (the dedicated user, Landlock, a network namespace,
the seccomp filter) and under the plan a GPU evaluation worker gets, and prints a table.
A diagnostic for machines without bubblewrap; it changes nothing.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cuda_agent.workspace.confine import ConfinePlan
from cuda_agent.workspace.isolation import capabilities, launcher, sandbox_uid
from cuda_agent.workspace.sandbox import SandboxPolicy, confine_plan

CODE = (
    "import ctypes\n"
    "lib = ctypes.CDLL('libcuda.so.1')\n"
    "print('cuInit', lib.cuInit(0))\n"
    "import torch\n"
    "print('torch devices', torch.cuda.device_count())\n"
)


def run(plan: ConfinePlan) -> str:
    proc = subprocess.run(
        launcher(plan, [sys.executable, "-c", CODE]),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd="/",
    )
    out = " | ".join(proc.stdout.split("\n")).strip(" |")
    err = proc.stderr.strip().splitlines()[-1:] if proc.returncode else []
    return f"rc {proc.returncode}: {out} {' '.join(err)}"[:300]


def main() -> None:
    print("devices:", " ".join(sorted(glob.glob("/dev/nvidia*"))))
    print("caps:", capabilities())
    work = Path(tempfile.mkdtemp(prefix="probe-"))
    work.chmod(0o777)
    uid = sandbox_uid(0)
    plans = {
        "nothing": ConfinePlan(),
        "user": ConfinePlan(uid=uid, gid=uid),
        "landlock": ConfinePlan(landlock=True, writable=[str(work)], devices=["/dev"]),
        "netns": ConfinePlan(netns=True),
        "seccomp": ConfinePlan(seccomp_net=True),
        "user+landlock": ConfinePlan(
            uid=uid, gid=uid, landlock=True, writable=[str(work)], devices=["/dev"]
        ),
    }
    plans["landlock /proc"] = ConfinePlan(
        landlock=True, writable=[str(work)], devices=["/dev", "/proc"]
    )
    policy = SandboxPolicy(workdir=work, tmpdir=work, gpu=True, drop_user=True)
    plans["worker plan"] = confine_plan(policy)[0]
    for name, plan in plans.items():
        print(f"{name:15} {run(plan)}")
    tracer = shutil.which("strace")
    if tracer:
        trace = work / "trace.txt"
        argv = [tracer, "-f", "-o", str(trace), sys.executable, "-c", CODE]
        plan = ConfinePlan(landlock=True, writable=[str(work)], devices=["/dev"])
        subprocess.run(launcher(plan, argv), capture_output=True, check=False, timeout=120)
        denied = [ln for ln in trace.read_text().splitlines() if "EACCES" in ln or "EPERM" in ln]
        print(f"denied under landlock ({len(denied)}):")
        for line in denied[:25]:
            print("  ", line[:200])
    print("devices after:", " ".join(sorted(glob.glob("/dev/nvidia*"))))
    print("uid", os.geteuid())


if __name__ == "__main__":
    main()
