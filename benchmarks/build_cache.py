"""Build-time benchmark: KernelBench-format ``load_inline`` candidates, ours against stock.

Usage:
  python benchmarks/build_cache.py [--backend cuda|cpu] [--skip-peer]
  python benchmarks/build_cache.py --corpus FILE.jsonl --n 8 [--skip-peer]
  python benchmarks/build_cache.py --corpus FILE.jsonl --n 52 --check [--out results.jsonl]

Default mode, on one candidate of our own (``cpp_sources`` and ``cuda_sources`` both include
``torch/extension.h``; a host wrapper using ``torch::empty_like``, ``TORCH_CHECK`` and
``AT_DISPATCH_FLOATING_TYPES``), each in a fresh cache:

* cold: empty cache (the light-header index and the precompiled ``main.cpp`` header are built
  on the way, as on a machine's first candidate);
* cold, warm toolchain: ``warm_up()`` first (what a pool does at start), then a candidate
  nobody compiled before;
* cached: the same candidate again;
* CUDA source edited: one constant changed in ``cuda_sources`` (only ``cuda.cu`` recompiles);
* stock load_inline, cold: torch's own ``load_inline`` on the same sources, its own folder;
* the workdir shape (``examples/bias_gelu_scale``): cold, one kernel file edited, cached.

``--corpus`` measures distinct candidates of a public corpus (JSON lines with ``custom_code``,
e.g. CUDA-L1's) the same way: ours cold with a warm toolchain, then stock ``load_inline``.
``--check`` compiles each corpus candidate in the light layout only, in the stock layout only
and as the builder does (``auto``), and reports whether the verdicts (and first error lines)
agree, how often the light layout needs the fallback, how often a light failure is the
sources' own (stock not compiled), and whether the builder's verdict always equals stock's.
CPU seconds are the compilers' user+system time.
Prints a table; record it in docs/benchmarks.md with date, machine and command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CPP_SOURCE = """
#include <torch/extension.h>
torch::Tensor scaled_gelu(torch::Tensor x, double scale);
"""

CUDA_SOURCE = """
#include <torch/extension.h>
#include <cuda_runtime.h>

template <typename scalar_t>
__global__ void scaled_gelu_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                   float scale, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = static_cast<float>(x[i]);
        float g = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
        y[i] = static_cast<scalar_t>(g * scale * MARKER);
    }
}

torch::Tensor scaled_gelu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const int64_t n = input.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "scaled_gelu", [&] {
        scaled_gelu_kernel<scalar_t><<<blocks, threads>>>(
            input.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), (float)scale, n);
    });
    return out;
}
"""

CPU_SOURCE = """
#include <torch/extension.h>
torch::Tensor scaled_gelu(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto out = torch::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_gelu", [&] {
        const scalar_t* p = x.data_ptr<scalar_t>();
        scalar_t* q = out.data_ptr<scalar_t>();
        for (int64_t i = 0; i < x.numel(); ++i) {
            float v = static_cast<float>(p[i]);
            q[i] = static_cast<scalar_t>(
                0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)))
                * scale * MARKER);
        }
    });
    return out;
}
"""


def candidate(backend: str, marker: str) -> dict[str, Any]:
    """Our KernelBench-format candidate; ``marker`` (a float literal) makes the text unique."""
    name = f"bench_{secrets.token_hex(4)}"
    if backend == "cpu":
        return {
            "name": name,
            "cpp_sources": CPU_SOURCE.replace("MARKER", marker),
            "functions": ["scaled_gelu"],
            "extra_cflags": ["-O3"],
        }
    return {
        "name": name,
        "cpp_sources": CPP_SOURCE,
        "cuda_sources": CUDA_SOURCE.replace("MARKER", marker),
        "functions": ["scaled_gelu"],
        "extra_cflags": ["-O3"],
        "extra_cuda_cflags": ["-O3", "--use_fast_math"],
    }


class CpuClock:
    """Wall and child-process CPU seconds of a block of work."""

    def __enter__(self) -> CpuClock:
        self.wall = time.monotonic()
        self.cpu = _children_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self.wall
        self.cpu = _children_cpu() - self.cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh_cache() -> Path:
    cache = Path(tempfile.mkdtemp(prefix="ca-bench-cache-"))
    os.environ["CUDA_AGENT_CACHE"] = str(cache)
    return cache


def ours(backend: str, call: dict[str, Any], label: str, rows: list[dict[str, Any]]) -> Any:
    from cuda_agent.evaluator.builder.builder import build_extension
    from cuda_agent.evaluator.builder.inline import inline_spec

    spec = inline_spec(backend, **call)
    with CpuClock() as clock:
        result = build_extension(spec, timeout_s=1800)
    rows.append(
        {
            "build": label,
            "wall_s": clock.wall,
            "cpu_s": clock.cpu,
            "compiled": result.objects_built,
            "layouts": ",".join(f"{k}:{v}" for k, v in sorted(result.layouts.items())),
            "ok": result.ok,
        }
    )
    if not result.ok:
        print(f"{label}: {result.error}", file=sys.stderr)
    return result


def stock(backend: str, call: dict[str, Any], label: str, rows: list[dict[str, Any]]) -> None:
    """torch's own ``load_inline`` on the same sources, in a folder of its own."""
    from torch.utils.cpp_extension import load_inline

    kwargs = {k: v for k, v in call.items() if k not in ("build_directory", "verbose")}
    kwargs["name"] = f"stock_{secrets.token_hex(3)}"
    folder = Path(tempfile.mkdtemp(prefix="ca-bench-torch-"))
    ok = True
    with CpuClock() as clock:
        try:
            load_inline(**kwargs, build_directory=str(folder), with_cuda=backend == "cuda")
        except Exception as err:  # a candidate that does not build with stock either
            ok = False
            print(f"{label}: {str(err).splitlines()[0][:200]}", file=sys.stderr)
    rows.append({"build": label, "wall_s": clock.wall, "cpu_s": clock.cpu, "ok": ok})
    shutil.rmtree(folder, ignore_errors=True)


def own_candidate(args: argparse.Namespace) -> list[dict[str, Any]]:
    from cuda_agent.evaluator.builder.builder import warm_up

    rows: list[dict[str, Any]] = []
    caches = [fresh_cache()]
    ours(args.backend, candidate(args.backend, "1.0f"), "cold (empty cache)", rows)
    caches.append(fresh_cache())
    with CpuClock() as clock:
        warm_up(args.backend)
    rows.append({"build": "warm_up() (once per machine)", "wall_s": clock.wall, "cpu_s": clock.cpu})
    call = candidate(args.backend, "1.5f")
    ours(args.backend, call, "cold, warm toolchain", rows)
    ours(args.backend, call, "cached", rows)
    edited = dict(call)
    key = "cuda_sources" if args.backend == "cuda" else "cpp_sources"
    edited[key] = str(call[key]).replace("1.5f", "2.5f")
    label = "CUDA source edited" if args.backend == "cuda" else "source edited"
    ours(args.backend, edited, label, rows)
    if not args.skip_peer:
        stock(args.backend, candidate(args.backend, "3.5f"), "stock load_inline, cold", rows)
    workdir(args.backend, rows)
    for cache in caches:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def workdir(backend: str, rows: list[dict[str, Any]]) -> None:
    """The CUDA Agent workdir shape (kernels/ + binding files) in the same warm cache."""
    from cuda_agent.evaluator.builder.builder import build_extension
    from cuda_agent.evaluator.builder.inline import workdir_spec
    from cuda_agent.examples import examples_root
    from cuda_agent.solutions.loader import load_solution
    from cuda_agent.workspace.template_files import harness_binding_files

    solution = load_solution(examples_root() / "bias_gelu_scale" / backend)
    kernels = {k: v for k, v in solution.files.items() if k.startswith("kernels/")}
    kernel_file = next(k for k in kernels if not k.endswith("_binding.cpp"))
    kernels[kernel_file] += f"\n// bench {secrets.token_hex(4)}\n"
    harness = harness_binding_files()
    for label in ("workdir: cold", "workdir: kernel file edited", "workdir: cached"):
        if label.endswith("edited"):
            kernels[kernel_file] += f"\n// edit {secrets.token_hex(4)}\n"
        with CpuClock() as clock:
            result = build_extension(workdir_spec(backend, kernels, harness), timeout_s=1800)
        rows.append(
            {
                "build": label,
                "wall_s": clock.wall,
                "cpu_s": clock.cpu,
                "compiled": result.objects_built,
                "ok": result.ok,
            }
        )


def corpus_calls(path: Path, n: int) -> list[tuple[str, dict[str, Any]]]:
    """The first ``n`` distinct statically extractable ``load_inline`` calls of a corpus."""
    from cuda_agent.solutions.static import analyse

    seen: set[str] = set()
    calls: list[tuple[str, dict[str, Any]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        code = record.get("custom_code")
        if not code:
            continue
        try:
            inline = analyse(code, "candidate.py").inline_calls
        except (SyntaxError, ValueError):
            continue
        for call in inline:
            if not call.get("cuda_sources") or not isinstance(call.get("name"), str):
                continue
            key = json.dumps([call.get("cpp_sources"), call.get("cuda_sources")], default=str)
            if key in seen:
                continue
            seen.add(key)
            label = f"L{record.get('level_id')}_{record.get('task_id')}"
            calls.append((label, call))
            if len(calls) >= n:
                return calls
    return calls


def corpus_speed(args: argparse.Namespace) -> list[dict[str, Any]]:
    from cuda_agent.evaluator.builder.builder import warm_up

    rows: list[dict[str, Any]] = []
    cache = fresh_cache()
    warm_up("cuda")
    for label, call in corpus_calls(args.corpus, args.n):
        call = {**call, "name": f"{call['name']}_{secrets.token_hex(3)}"}
        ours("cuda", call, f"{label} ours", rows)
        if not args.skip_peer:
            stock("cuda", call, f"{label} stock", rows)
    shutil.rmtree(cache, ignore_errors=True)
    return rows


FIRST_ERROR = re.compile(
    r"^(?P<loc>\S+?)(?::(?P<line>\d+)(?::\d+)?:|\((?P<paren>\d+)\):) (?:fatal )?error\b(?P<msg>.*)$"
)


def first_error(text: str | None) -> str:
    """The first error line, file reduced to its base name (``cuda_sources:12: error: ...``)."""
    for line in (text or "").splitlines():
        match = FIRST_ERROR.match(line.strip())
        if match:
            line = match["line"] or match["paren"]
            return f"{Path(match['loc']).name}:{line}: error{match['msg']}"
    lines = [ln for ln in (text or "").splitlines() if "error" in ln.lower()]
    return lines[0].strip() if lines else ""


def corpus_check(args: argparse.Namespace) -> list[dict[str, Any]]:
    from cuda_agent.evaluator.builder.builder import OWN_FAILURE_LAYOUT, build_extension, warm_up
    from cuda_agent.evaluator.builder.inline import inline_spec
    from cuda_agent.evaluator.builder.light_failure import without_hints

    cache = fresh_cache() if not args.keep_cache else None
    warm_up("cuda", stock_pch=True)
    rows: list[dict[str, Any]] = []
    out = open(args.out, "a", encoding="utf-8") if args.out else None  # noqa: SIM115
    for label, call in corpus_calls(args.corpus, args.n):
        row: dict[str, Any] = {"build": label}
        try:
            spec = inline_spec("cuda", **call)
        except (ValueError, TypeError) as err:
            row.update(verdict="spec error", error=str(err))
            rows.append(row)
            continue
        for layout in ("light", "stock"):
            with CpuClock() as clock:
                result = build_extension(spec, timeout_s=3600, jobs=1, layout=layout)
            row[f"{layout}_ok"] = result.ok
            row[f"{layout}_error"] = first_error(result.error)
            row[f"{layout}_cpu_s"] = round(clock.cpu, 1)
            row[f"{layout}_s"] = round(result.seconds, 1)
            row[f"{layout}_layouts"] = result.layouts
        row["same"] = row["light_ok"] == row["stock_ok"] and (
            row["light_ok"] or row["light_error"] == row["stock_error"]
        )
        # what the builder reports (light, stock after a light failure, or a light failure in
        # the sources' own code without a stock compile): it must agree with stock
        with CpuClock() as clock:
            auto = build_extension(spec, timeout_s=3600, jobs=1)
        row["auto_ok"] = auto.ok
        row["auto_s"] = round(auto.seconds, 1)
        row["auto_error"] = first_error(auto.error)
        row["auto_layouts"] = auto.layouts
        row["auto_own_error"] = OWN_FAILURE_LAYOUT in auto.layouts.values()
        row["auto_same"] = auto.ok == row["stock_ok"] and (
            auto.ok or row["auto_error"] == without_hints(row["stock_error"])
        )
        rows.append(row)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()
        print(json.dumps(row), flush=True)
    if out:
        out.close()
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'build':<34} {'wall s':>8} {'cpu s':>8} {'compiled':>8}  layouts")
    for row in rows:
        wall = f"{row['wall_s']:.2f}" if "wall_s" in row else "-"
        cpu = f"{row['cpu_s']:.1f}" if "cpu_s" in row else "-"
        compiled = row.get("compiled", "-")
        note = row.get("layouts", "") + ("" if row.get("ok", True) else " FAILED")
        print(f"{row['build']:<34} {wall:>8} {cpu:>8} {compiled!s:>8}  {note}")


def print_check(rows: list[dict[str, Any]]) -> None:
    """Counts by (light verdict, stock verdict). Light failing makes the builder compile the
    stock layout and report that (slower, same answer); light building where stock fails
    would be a wrong answer."""
    pairs = {(True, True): 0, (False, True): 0, (False, False): 0, (True, False): 0}
    for row in rows:
        if "light_ok" in row:
            pairs[(row["light_ok"], row["stock_ok"])] += 1
    print(f"units checked: {sum(pairs.values())}")
    print(f"  both build (light layout used):             {pairs[(True, True)]}")
    print(f"  light fails, stock builds (fallback, slow): {pairs[(False, True)]}")
    print(f"  both fail (stock's error reported):         {pairs[(False, False)]}")
    print(f"  light builds, stock fails (WRONG):          {pairs[(True, False)]}")
    same = sum(1 for r in rows if r.get("same"))
    print(f"  same verdict and same first error:          {same}")
    own = [r for r in rows if r.get("auto_own_error")]
    saved = sum(r["stock_s"] for r in own)
    print(f"  light fails in the sources' own code:       {len(own)} (stock not compiled:")
    ours_s = sum(r["auto_s"] for r in own)
    print(f"    {saved:.0f} s of stock builds saved, ours took {ours_s:.0f} s)")
    agree = sum(1 for r in rows if r.get("auto_same"))
    print(f"  builder's verdict = stock's (first error):  {agree} of {sum(pairs.values())}")
    for row in rows:
        if "light_ok" in row and not row["same"]:
            print(f"  differs: {row['build']}: light={row['light_error']!r}")
            print(f"  {'':>9} {'':>{len(row['build'])}}  stock={row['stock_error']!r}")
        if "auto_ok" in row and not row["auto_same"]:
            print(f"  BUILDER DIFFERS: {row['build']}: ours={row['auto_error']!r}")
            print(f"  {'':>17} {'':>{len(row['build'])}}  stock={row['stock_error']!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cuda", choices=("cpu", "cuda"))
    parser.add_argument("--skip-peer", action="store_true", help="skip stock load_inline")
    parser.add_argument("--corpus", type=Path, help="JSON lines with custom_code")
    parser.add_argument("--n", type=int, default=8, help="distinct corpus candidates")
    parser.add_argument("--check", action="store_true", help="light vs stock verdicts")
    parser.add_argument("--out", type=Path, help="--check: append one JSON line per unit")
    parser.add_argument("--keep-cache", action="store_true", help="--check: use CUDA_AGENT_CACHE")
    args = parser.parse_args()
    if args.corpus and not args.corpus.is_file():
        parser.error(f"{args.corpus} is not a file")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    if args.corpus and args.check:
        print_check(corpus_check(args))
    elif args.corpus:
        print_table(corpus_speed(args))
    else:
        print_table(own_candidate(args))


if __name__ == "__main__":
    main()
