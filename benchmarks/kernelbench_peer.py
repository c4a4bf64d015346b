"""KernelBench as the peer: its own evaluator's figures, for side-by-side comparison.

KernelBench (ScalingIntelligence/KernelBench) is imported from a read-only checkout by putting
``<kb>/src`` on ``sys.path``; none of its code is copied here. Its evaluator's output (prints,
nvcc/ninja logs) goes to a log file, not to the table.

Modes:
  self-speedup  each reference problem is its own candidate (``class Model`` renamed
                ``ModelNew``); KernelBench's correctness + cuda-event timing
                (``eval_kernel_against_ref``, the arguments ``scripts/run_and_check.py`` uses) and
                its eager reference timing (``timing.measure_ref_program_time``).
  build         KernelBench's load_inline path for its few-shot add example: cold build in a
                fresh TORCH_EXTENSIONS_DIR, cached load in a new process, whole evaluation cold.
  stream        KernelBench's non-default-stream adversarial kernel against level1/1 (as in its
                ``unit_tests/test_eval_adversarial.py``), next to an honest cuBLAS timing.
  transform     (no GPU) print the ModelNew transform of some problems.
  preflight     (no GPU needed) import KernelBench's evaluator and report versions / stubs.

On the GPU machine (KernelBench at .kb, wheels in .whl):
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 benchmarks/kernelbench_peer.py self-speedup --kb .kb \\
      --problems L1/19_ReLU.py,L2/12_Gemm_Multiply_LeakyReLU.py --out $OUT/kb_self.json

KernelBench's utils module imports ``openai`` and ``litellm`` at module level (used only to
query LLMs); when they are not installed, inert stand-in modules are registered for them so
that ``kernelbench.eval`` imports. The stubs are listed in the JSON (``kb.stubs``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
DEFAULT_KB = HERE.parent.parent / ".kb"
if not __package__ and str(HERE.parent.parent) not in sys.path:
    # Run as a script (also as its own worker, see kb_peer/worker.py): sys.path[0] is
    # benchmarks/, so the repository goes on the path for ``benchmarks.kb_peer``.
    sys.path.insert(0, str(HERE.parent.parent))

from benchmarks.kb_peer.build import build_eval, build_load, cmd_build  # noqa: E402
from benchmarks.kb_peer.cpu_modes import cmd_preflight, cmd_transform  # noqa: E402
from benchmarks.kb_peer.kb_calls import RUN_AND_CHECK  # noqa: E402
from benchmarks.kb_peer.kb_import import import_kb  # noqa: E402
from benchmarks.kb_peer.report import error_string, jsonable  # noqa: E402
from benchmarks.kb_peer.self_speedup import cmd_self_speedup, self_one  # noqa: E402
from benchmarks.kb_peer.stream import cmd_stream, stream_eval, stream_honest  # noqa: E402

WORKER_TASKS: dict[str, Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]] = {
    "self_one": self_one,
    "build_load": build_load,
    "build_eval": build_eval,
    "stream_eval": stream_eval,
    "stream_honest": stream_honest,
}


def worker_main(task: str, payload_json: str, result_path: str) -> None:
    t0 = time.perf_counter()
    payload = json.loads(payload_json)
    out: dict[str, Any] = {}
    try:
        mods = import_kb(Path(payload["kb"]))
        out["import_s"] = time.perf_counter() - t0  # on a GPU this includes CUDA init
        out["stubs"] = mods["stubs"]
        out.update(WORKER_TASKS[task](mods, payload))
    except BaseException as exc:
        out["error"] = error_string(exc)
        out["traceback"] = traceback.format_exc()[-4000:]
    Path(result_path).write_text(json.dumps(jsonable(out)))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="mode", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--kb", default=str(DEFAULT_KB), help="KernelBench checkout (default .kb)")
        sp.add_argument("--out", type=Path, help="write JSON results here")
        sp.add_argument("--log", help="KernelBench's output (default: <out>.kb.log or a temp file)")
        sp.add_argument(
            "--timeout", type=float, default=300.0, help="seconds per worker process (default 300)"
        )

    def problems(sp: argparse.ArgumentParser) -> None:
        sp.add_argument(
            "--problems",
            action="append",
            help="comma-separated, relative to <kb>/KernelBench; L1/ = level1/",
        )
        sp.add_argument("--problem-file", help="text file: problems, one per line (# comments)")

    s = sub.add_parser("self-speedup", help="reference as candidate: KB correctness + timing")
    common(s)
    problems(s)
    s.add_argument("--repeat", type=int, default=1, help="repeat the whole measurement N times")
    s.add_argument("--correct-trials", type=int, default=RUN_AND_CHECK["num_correct_trials"])
    s.add_argument("--perf-trials", type=int, default=RUN_AND_CHECK["num_perf_trials"])
    s.add_argument(
        "--timing-method",
        default=RUN_AND_CHECK["timing_method"],
        help="KB timing method (cuda_event, do_bench, do_bench_impl, host_time)",
    )
    s.add_argument("--device", default="cuda:0")
    s.add_argument(
        "--no-excessive-speedup-check",
        action="store_true",
        help="skip the reference timing inside eval_kernel_against_ref",
    )
    s.add_argument(
        "--compile-ref",
        action="store_true",
        help="also time the reference under torch.compile (as run_and_check does)",
    )
    s.add_argument(
        "--isolate",
        action="store_true",
        help="evaluate each problem in its own process (timed inside it)",
    )
    s.set_defaults(func=cmd_self_speedup)

    b = sub.add_parser("build", help="KB's load_inline path: cold, cached, whole evaluation")
    common(b)
    b.add_argument(
        "--gpu-arch",
        default="Hopper",
        help="KB set_gpu_arch value (run_and_check maps H200 to Hopper); 'none' unsets",
    )
    b.add_argument("--device", default="cuda:0")
    b.set_defaults(func=cmd_build)

    st = sub.add_parser("stream", help="KB's non-default-stream adversarial kernel")
    common(st)
    st.add_argument("--gpu-arch", default="Hopper")
    st.add_argument(
        "--stream-timing",
        default="do_bench,cuda_event",
        help="KB timing methods to evaluate with (the test uses do_bench)",
    )
    st.set_defaults(func=cmd_stream)

    t = sub.add_parser("transform", help="(CPU) show the Model -> ModelNew transform")
    common(t)
    problems(t)
    t.set_defaults(func=cmd_transform)

    pf = sub.add_parser("preflight", help="(CPU) import KB's evaluator, report versions/stubs")
    common(pf)
    pf.set_defaults(func=cmd_preflight)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_worker"]:
        worker_main(*argv[1:4])
        return 0
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
