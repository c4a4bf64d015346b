"""``python -m benchmarks.compat from-runs|prepare|kernelbench|ours|table|summary``.

Run from the repository root with ``src`` on ``PYTHONPATH`` (``export PYTHONPATH=$PWD/src:$PWD``).
Bad arguments or inputs end with one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.compat.corpus import prepare
from benchmarks.compat.kb_runner import KbConfig, run_kernelbench
from benchmarks.compat.ours import run_ours, summary
from benchmarks.compat.public_runs import convert, write_rows
from benchmarks.compat.table import markdown

from cuda_agent.core.errors import CudaAgentError


def _levels(text: str | None) -> tuple[int, ...] | None:
    return tuple(int(x) for x in text.split(",") if x.strip()) if text else None


def _deadline(args: argparse.Namespace) -> float | None:
    if args.deadline is not None:
        return float(args.deadline)
    return time.time() + args.seconds if args.seconds is not None else None


def cmd_from_runs(args: argparse.Namespace) -> None:
    rows = convert(Path(args.runs), Path(args.kb), args.level)
    print(json.dumps(write_rows(rows, Path(args.out))))


def cmd_prepare(args: argparse.Namespace) -> None:
    kb = Path(args.kb) if args.kb else None
    manifest = prepare(Path(args.corpus), Path(args.out), kb, _levels(args.levels))
    print(json.dumps({"set": manifest["set"], **manifest["counts"]}))


def _tolerances(text: str) -> tuple[float | None, ...]:
    """``1e-2,1e-4`` -> (0.01, 0.0001); ``native``: KernelBench's own (None)."""
    out: list[float | None] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            value = None if part == "native" else float(part)
        except ValueError:
            raise CudaAgentError(f"--tolerance: {part!r} is not a number or 'native'") from None
        if value is not None and not value > 0:
            raise CudaAgentError(f"--tolerance: {part} must be > 0")
        if value in out:
            raise CudaAgentError(f"--tolerance: {part} given twice")
        out.append(value)
    if not out:
        raise CudaAgentError("--tolerance: no tolerance given")
    return tuple(out)


def cmd_kernelbench(args: argparse.Namespace) -> None:
    config = KbConfig(
        kb=Path(args.kb),
        timeout_s=args.timeout,
        deadline=_deadline(args),
        trials=args.trials,
        tolerances=_tolerances(args.tolerance),
        gpu_arch=args.gpu_arch,
        device=args.device,
        work_dir=Path(args.work_dir),
        backend=args.backend,
    )
    if args.jobs:
        config.jobs = args.jobs
    for set_dir in args.set:
        only = set(args.only.split(",")) if args.only else None
        print(json.dumps(run_kernelbench(Path(set_dir), config, only)), flush=True)


def cmd_ours(args: argparse.Namespace) -> None:
    for set_dir in args.set:
        deadline = _deadline(args)
        out = run_ours(Path(set_dir), args.backend, args.policy, deadline, args.extra, args.run)
        print(json.dumps(out), flush=True)


def cmd_summary(args: argparse.Namespace) -> None:
    for set_dir in args.set:
        print(json.dumps(summary(Path(set_dir), args.run)))


def cmd_table(args: argparse.Namespace) -> None:
    text = markdown([Path(s) for s in args.set], args.run)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compat", description=__doc__)
    sub = p.add_subparsers(dest="step", required=True)

    fr = sub.add_parser("from-runs", help="a KernelBench runs folder -> a corpus JSONL")
    fr.add_argument("runs", help="e.g. .corpus-src/technoabsurdist/runs/gemini_level1_run")
    fr.add_argument("--kb", required=True, help="the KernelBench checkout the run was made in")
    fr.add_argument("--out", required=True, help="the corpus JSONL to write")
    fr.add_argument("--level", type=int, help="only kernel files of this level")
    fr.set_defaults(func=cmd_from_runs)

    pr = sub.add_parser("prepare", help="a corpus JSONL -> SET/problems, SET/solutions")
    pr.add_argument("corpus", help="e.g. .corpus/cuda-l1/h20.jsonl")
    pr.add_argument("--out", required=True, help="the set folder to write")
    pr.add_argument("--kb", help="a KernelBench checkout (problem names); default: numbers")
    pr.add_argument("--levels", help="only these levels, e.g. 1,2")
    pr.set_defaults(func=cmd_prepare)

    def timed(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("set", nargs="+", help="prepared set folder(s)")
        sp.add_argument("--deadline", type=float, help="stop by this epoch time (resumable)")
        sp.add_argument("--seconds", type=float, help="stop after this many seconds")

    kb = sub.add_parser("kernelbench", help="KernelBench's verdicts -> SET/kernelbench.jsonl")
    timed(kb)
    kb.add_argument("--kb", default=".kb", help="KernelBench checkout (default .kb)")
    kb.add_argument("--jobs", type=int, help="evaluations at once (default: cores / 3)")
    kb.add_argument("--timeout", type=float, default=600.0, help="seconds per solution")
    kb.add_argument("--trials", type=int, default=5, help="correctness trials (its default 5)")
    kb.add_argument(
        "--tolerance",
        default="1e-2,1e-4",
        help="atol = rtol for fp32, comma-separated, the first the primary verdict (default "
        "1e-2,1e-4: KernelBench v0.1, the paper and ours; KernelBench today); 'native' is "
        "KernelBench's own (1e-4 for fp32). One evaluation gives every verdict: the loosest "
        "first, the stricter ones in the same process (no rebuild) while correct",
    )
    kb.add_argument("--gpu-arch", default="Hopper", help="KernelBench set_gpu_arch ('none')")
    kb.add_argument("--device", default="cuda:0")
    kb.add_argument(
        "--backend",
        default="cuda",
        choices=("cuda", "triton"),
        help="eval_kernel_against_ref's backend (default cuda)",
    )
    kb.add_argument("--only", help="comma-separated ids (default: every solution)")
    kb.add_argument("--work-dir", default="/tmp/compat-kb", help="build folders and logs")
    kb.set_defaults(func=cmd_kernelbench)

    ours = sub.add_parser("ours", help="cuda-agent bench run over the set -> SET/ours")
    timed(ours)
    ours.add_argument("--backend", default="cuda")
    ours.add_argument("--policy", default="kernelbench")
    ours.add_argument("--run", default="ours", help="run folder name in the set (default ours)")
    ours.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more bench args")
    ours.set_defaults(func=cmd_ours)

    sm = sub.add_parser("summary", help="wall time and verdict counts of `ours` so far")
    sm.add_argument("set", nargs="+")
    sm.add_argument("--run", default="ours", help="run folder name in the set")
    sm.set_defaults(func=cmd_summary)

    tb = sub.add_parser("table", help="Markdown: agreement and disagreements by reason")
    tb.add_argument("set", nargs="+")
    tb.add_argument("--out", help="also write the Markdown here")
    tb.add_argument("--run", default="ours", help="our run folder name in each set")
    tb.set_defaults(func=cmd_table)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.func(args)
    except (CudaAgentError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
