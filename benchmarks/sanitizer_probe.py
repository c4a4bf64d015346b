"""Where compute-sanitizer's time goes in a torch process, flag set by flag set.

``python benchmarks/sanitizer_probe.py [--seconds 150] [--out FILE.jsonl]`` (needs a GPU,
torch, Triton and compute-sanitizer).

One small target program (``--target``, this file run again) is run plain and under each of
several memcheck set-ups; it prints a timestamp after each of its steps: ``import torch``, CUDA
initialised, a vendor transposed 3-d convolution and a GEMM (cuDNN, cuBLAS: kernels nobody
here wrote), two Triton kernels of its own (``probe_add``, honest, and ``probe_oob``, which
reads one element past the end of its input and discards it). For each set-up: the wall time,
each step's seconds, and how many errors the checker reported (the out-of-bounds read should
be found by every set-up that checks ``probe_oob`` with each tensor an allocation of its own).
This measures; it asserts nothing. Prints a line per run and a table last.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SANITIZER_CANDIDATES = ("/usr/local/cuda/bin/compute-sanitizer",)
BASE = ["--tool", "memcheck", "--leak-check", "no", "--report-api-errors", "no"]
FILTER = ["--kernel-name", "kns=probe_"]
SETUPS: dict[str, tuple[list[str], dict[str, str]]] = {
    "plain": ([], {}),
    "full (today)": (
        [*BASE, "--padding", "4096"],
        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    ),
    "own kernels": ([*BASE, "--padding", "4096", *FILTER], {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    "own kernels, no backtrace": (
        [*BASE, "--padding", "4096", *FILTER, "--show-backtrace", "no"],
        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    ),
    "own kernels, caching allocator": ([*BASE, "--padding", "4096", *FILTER], {}),
    "exclude vendor": (
        [*BASE, "--padding", "4096", "--kernel-name-exclude", "regex=^(?!probe_)"],
        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    ),
}


def target() -> None:
    began = time.monotonic()

    def mark(step: str) -> None:
        print(json.dumps({"step": step, "t": round(time.monotonic() - began, 3)}), flush=True)

    import torch

    mark("import torch")
    import triton
    import triton.language as tl

    mark("import triton")
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    mark("cuda init")
    conv = torch.nn.ConvTranspose3d(32, 32, 3, stride=2).cuda()
    x = torch.randn(8, 32, 24, 24, 24, device="cuda")
    with torch.no_grad():
        conv(x)
        torch.cuda.synchronize()
        mark("conv_transpose3d")
        a = torch.randn(2048, 2048, device="cuda")
        (a @ a).sum().item()
    mark("matmul")

    @triton.jit
    def probe_add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    @triton.jit
    def probe_oob(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        nxt = tl.load(x_ptr + offs + 1)  # one past the end on the last lane: no mask
        val = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.where(offs + 1 < n, val + 0.0 * nxt, val), mask=mask)

    n = 4096
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    probe_add[(n // 256,)](src, dst, n, BLOCK=256)
    torch.cuda.synchronize()
    mark("triton probe_add")
    probe_oob[(n // 256,)](src, dst, n, BLOCK=256)
    torch.cuda.synchronize()
    mark("triton probe_oob")


def sanitizer() -> str | None:
    found = shutil.which("compute-sanitizer")
    return found or next((c for c in SANITIZER_CANDIDATES if Path(c).exists()), None)


def run(name: str, tool: str, seconds: float) -> dict[str, Any]:
    args, env = SETUPS[name]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "memcheck.log"
        prefix = [tool, *args, "--log-file", str(log)] if args else []
        cmd = [*prefix, sys.executable, __file__, "--target"]
        began = time.monotonic()
        try:
            done = subprocess.run(
                cmd,
                env={**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=seconds,
                check=False,
            )
            out, rc = done.stdout, done.returncode
        except subprocess.TimeoutExpired as err:
            out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            rc = None
        wall = round(time.monotonic() - began, 2)
        text = log.read_text(errors="replace") if log.exists() else ""
    steps: dict[str, float] = {}
    last = 0.0
    for line in out.splitlines():
        if line.startswith("{"):
            mark = json.loads(line)
            steps[mark["step"]] = round(mark["t"] - last, 2)
            last = mark["t"]
    summary = re.search(r"ERROR SUMMARY: ([\d,]+) error", text)
    return {
        "setup": name,
        "wall_s": wall,
        "returncode": rc,
        "timed_out": rc is None,
        "errors": int(summary.group(1).replace(",", "")) if summary else None,
        "steps_s": steps,
        "first_finding": next((ln.strip("= ") for ln in text.splitlines() if "Invalid" in ln), "")[
            :160
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--only", default="", help="comma-separated set-up names")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.target:
        target()
        return 0
    tool = sanitizer()
    if tool is None:
        print("compute-sanitizer not found")
        return 2
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, check=False)
    print(version.stdout.strip().splitlines()[-1] if version.stdout else "version unknown")
    names = [n for n in SETUPS if not args.only or n in args.only.split(",")]
    rows = []
    for name in names:
        row = run(name, tool, args.seconds)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.out:
            with args.out.open("a") as out:
                out.write(json.dumps(row) + "\n")
    print(f"| set-up | wall s | errors | {' | '.join(rows[0]['steps_s'])} |")
    for row in rows:
        steps = " | ".join(str(v) for v in row["steps_s"].values())
        print(f"| {row['setup']} | {row['wall_s']} | {row['errors']} | {steps} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
