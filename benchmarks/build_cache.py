"""Build-time benchmark: cold build, cached rebuild, and a one-file edit of a workdir.

Usage: python benchmarks/build_cache.py [--backend cpu|cuda]

Uses a fresh cache directory, so the first build is truly cold. Compares with torch's own
``load_inline`` (``torch/extension.h``, its own build folder) on the same source, the peer
figure. Prints a small table; record it in docs/benchmarks.md with date, machine and command.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="ca-bench-cache-"))
    os.environ["CUDA_AGENT_CACHE"] = str(cache)

    from cuda_agent.evaluator.build.builder import build_extension
    from cuda_agent.evaluator.build.inline import inline_spec, workdir_spec
    from cuda_agent.examples import examples_root
    from cuda_agent.solutions.loader import load_solution
    from cuda_agent.solutions.static import analyse
    from cuda_agent.workspace.template_files import harness_binding_files

    rows = []
    single = load_solution(examples_root() / "relu" / f"{args.backend}.py")
    (call,) = analyse(single.files[single.entry_file], single.entry_file).inline_calls
    spec = inline_spec(args.backend, **call)
    for label in ("single file: cold", "single file: cached"):
        result = build_extension(spec)
        assert result.ok, result.error
        rows.append((label, result.seconds, result.objects_built))

    workdir = load_solution(examples_root() / "bias_gelu_scale" / args.backend)
    kernels = {k: v for k, v in workdir.files.items() if k.startswith("kernels/")}
    harness = harness_binding_files()
    result = build_extension(workdir_spec(args.backend, kernels, harness))
    assert result.ok, result.error
    rows.append(("workdir: cold", result.seconds, result.objects_built))
    kernel_file = next(k for k in kernels if not k.endswith("_binding.cpp"))
    kernels[kernel_file] += f"\n// edit {secrets.token_hex(4)}\n"
    result = build_extension(workdir_spec(args.backend, kernels, harness))
    assert result.ok, result.error
    rows.append(("workdir: kernel file edited", result.seconds, result.objects_built))
    result = build_extension(workdir_spec(args.backend, kernels, harness))
    rows.append(("workdir: cached", result.seconds, result.objects_built))

    if not args.skip_peer:
        from torch.utils.cpp_extension import load_inline

        build_dir = Path(tempfile.mkdtemp(prefix="ca-bench-torch-"))
        kwargs = dict(call)
        kwargs["name"] = f"peer_{secrets.token_hex(3)}"
        start = time.monotonic()
        load_inline(**kwargs, build_directory=str(build_dir))
        rows.append(("peer: torch load_inline, cold", time.monotonic() - start, -1))
        shutil.rmtree(build_dir, ignore_errors=True)

    shutil.rmtree(cache, ignore_errors=True)
    print(f"{'build':<34} {'seconds':>8} {'objects compiled':>17}")
    for label, seconds, built in rows:
        print(f"{label:<34} {seconds:>8.2f} {built if built >= 0 else '-':>17}")


if __name__ == "__main__":
    main()
