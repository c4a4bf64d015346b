"""Mode ``stream``: KernelBench's non-default-stream adversarial kernel against level1/1.

KernelBench's evaluation of the kernel (as its ``unit_tests/test_eval_adversarial.py`` runs
it) with each timing method asked for, next to honest figures for the same shape: cuBLAS
(``torch.matmul``) and the kernel itself, timed by events and by device-wide synchronised wall
time. Each runs in its own worker; it reports, it does not judge.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.kb_peer.kb_calls import exec_result, set_arch, static_check
from benchmarks.kb_peer.kb_import import env_info, kb_provenance
from benchmarks.kb_peer.report import log_path, print_table, ratio, write_json
from benchmarks.kb_peer.worker import run_worker

STREAM_PROBLEM = "level1/1_Square_matrix_multiplication_.py"
STREAM_KERNEL = "src/kernelbench/unit_tests/test_kernels/non_default_stream_kernel.py"
# unit_tests/test_eval_adversarial.py::test_non_default_stream
STREAM_TEST = {"num_correct_trials": 5, "num_perf_trials": 10, "excessive_speedup_threshold": 10}


def stream_eval(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """test_eval_adversarial.run_test_kernel, with the timing method given."""
    kb = Path(payload["kb"])
    set_arch(mods, payload["gpu_arch"])
    ref = (kb / "KernelBench" / STREAM_PROBLEM).read_text()
    cand = (kb / STREAM_KERNEL).read_text()
    static = static_check(mods, cand)
    start = time.perf_counter()
    # Same call as the test: default device, no build_dir (TORCH_EXTENSIONS_DIR is set in env).
    result = mods["eval"].eval_kernel_against_ref(
        original_model_src=ref,
        custom_model_src=cand,
        num_correct_trials=STREAM_TEST["num_correct_trials"],
        num_perf_trials=STREAM_TEST["num_perf_trials"],
        measure_performance=True,
        timing_method=payload["timing_method"],
        check_for_excessive_speedup=True,
        excessive_speedup_threshold=STREAM_TEST["excessive_speedup_threshold"],
    )
    wall = time.perf_counter() - start
    res = exec_result(result)
    meta = res.get("metadata") or {}
    return {
        "eval_s": wall,
        "static_check": static,
        "correct": bool(res.get("correctness")),
        "cand_ms": res.get("runtime"),
        "ref_ms": res.get("ref_runtime"),
        "speedup": ratio(res.get("ref_runtime"), res.get("runtime")),
        "excessive_speedup_flag": bool(meta.get("excessive_speedup")),
        "kb_result": res,
    }


def _median_event_ms(fn: Callable[[], object], warmup: int = 5, trials: int = 20) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _median_synced_wall_ms(fn: Callable[[], object], warmup: int = 5, trials: int = 20) -> float:
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(trials):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()  # device-wide: waits for every stream
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def stream_honest(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """Honest figures for the same shape: torch.matmul (cuBLAS) and the adversarial kernel."""
    import torch

    kb = Path(payload["kb"])
    set_arch(mods, payload["gpu_arch"])
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference and the kernel are FP32
    ctx: dict[str, Any] = {}
    _model, _init, get_inputs = mods["eval"].load_original_model_and_inputs(
        (kb / "KernelBench" / STREAM_PROBLEM).read_text(), ctx
    )
    mods["eval"].set_seed(42)
    a, b = (x.cuda() for x in get_inputs())
    stream_ptr = torch.cuda.current_stream().cuda_stream
    matmul_ms = _median_event_ms(lambda: torch.matmul(a, b))
    matmul_wall_ms = _median_synced_wall_ms(lambda: torch.matmul(a, b))
    out: dict[str, Any] = {
        "shape": [list(a.shape), list(b.shape)],
        "dtype": str(a.dtype),
        "allow_tf32": False,
        "stream": "default" if stream_ptr == 0 else hex(stream_ptr),
        "matmul_event_median_ms": matmul_ms,
        "matmul_synced_wall_median_ms": matmul_wall_ms,
        "trials": 20,
        "warmup": 5,
    }
    model_new = mods["eval"].load_custom_model(
        (kb / STREAM_KERNEL).read_text(), {}, payload["build_dir"]
    )
    adv = model_new().cuda()
    with torch.no_grad():
        out["adversarial_event_median_ms"] = _median_event_ms(lambda: adv(a, b))
        out["adversarial_synced_wall_median_ms"] = _median_synced_wall_ms(lambda: adv(a, b))
        got = adv(a, b)
        torch.cuda.synchronize()
        out["adversarial_max_abs_diff"] = float((got - torch.matmul(a, b)).abs().max())
    out["true_speedup_vs_matmul"] = ratio(matmul_wall_ms, out["adversarial_synced_wall_median_ms"])
    return out


def cmd_stream(args: argparse.Namespace) -> int:
    kb = Path(args.kb).resolve()
    log = log_path(args)
    ext_dir = Path(tempfile.mkdtemp(prefix="kbpeer-stream-"))
    base = {"kb": str(kb), "gpu_arch": args.gpu_arch, "build_dir": str(ext_dir)}
    methods = [m.strip() for m in args.stream_timing.split(",") if m.strip()]
    report: dict[str, Any] = {
        "mode": "stream",
        "kb": kb_provenance(kb),
        "env": env_info(),
        "config": {
            **base,
            "problem": STREAM_PROBLEM,
            "kernel": STREAM_KERNEL,
            "eval_args": STREAM_TEST,
            "timing_methods": methods,
        },
        "log": str(log),
        "kb_evals": [],
    }
    env = {"TORCH_EXTENSIONS_DIR": str(ext_dir)}
    for method in methods:
        rec = run_worker("stream_eval", {**base, "timing_method": method}, log, args.timeout, env)
        rec["timing_method"] = method
        report["kb_evals"].append(rec)
        write_json(args.out, report)
    honest = run_worker("stream_honest", base, log, args.timeout, env)
    report["honest"] = honest
    write_json(args.out, report)
    shutil.rmtree(ext_dir, ignore_errors=True)

    rows = [
        [
            f"KB eval, {r['timing_method']}",
            r.get("correct"),
            r.get("cand_ms"),
            r.get("ref_ms"),
            r.get("speedup"),
            r.get("excessive_speedup_flag"),
            (r.get("error") or "")[:40],
        ]
        for r in report["kb_evals"]
    ]
    rows.append(
        [
            "torch.matmul, events (median 20)",
            None,
            honest.get("matmul_event_median_ms"),
            None,
            None,
            None,
            (honest.get("error") or "")[:40],
        ]
    )
    rows.append(
        [
            "torch.matmul, synced wall (median 20)",
            None,
            honest.get("matmul_synced_wall_median_ms"),
            None,
            None,
            None,
            "",
        ]
    )
    rows.append(
        [
            "adversarial, events (median 20)",
            None,
            honest.get("adversarial_event_median_ms"),
            None,
            None,
            None,
            "",
        ]
    )
    rows.append(
        [
            "adversarial, synced wall (median 20)",
            None,
            honest.get("adversarial_synced_wall_median_ms"),
            None,
            honest.get("true_speedup_vs_matmul"),
            None,
            "",
        ]
    )
    print_table(["measurement", "correct", "ms", "ref ms", "speedup", "flagged", "error"], rows)
    static = next(
        (r.get("static_check") for r in report["kb_evals"] if r.get("static_check")), None
    )
    if static is not None:
        print(f"\nKB static checker on the kernel: {static}")
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0
