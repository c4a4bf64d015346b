"""Mode ``build``: KernelBench's ``load_inline`` path on its few-shot add example.

Four steps, each in its own worker: a cold build and load in a fresh TORCH_EXTENSIONS_DIR, a
cached load in a new process, then a whole KernelBench evaluation (run_and_check's arguments)
cold and cached. It times KernelBench's path only; our build cache is benchmarks/build_cache.py.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kb_peer.kb_calls import RUN_AND_CHECK, exec_result, set_arch, static_check
from benchmarks.kb_peer.kb_import import env_info, kb_provenance
from benchmarks.kb_peer.report import log_path, print_table, write_json
from benchmarks.kb_peer.worker import run_worker

ADD_CANDIDATE = "src/kernelbench/prompts/model_new_ex_add.py"
ADD_REFERENCE = "src/kernelbench/prompts/model_ex_add.py"


def build_load(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """KB's load_custom_model on the add example with build_dir (sets TORCH_EXTENSIONS_DIR)."""
    set_arch(mods, payload["gpu_arch"])
    src = (Path(payload["kb"]) / ADD_CANDIDATE).read_text()
    start = time.perf_counter()
    model_new = mods["eval"].load_custom_model(src, {}, payload["build_dir"])
    out: dict[str, Any] = {"load_s": time.perf_counter() - start, "ok": model_new is not None}
    out["torch_cuda_arch_list"] = os.environ.get("TORCH_CUDA_ARCH_LIST")
    out["so_files"] = sorted(str(f) for f in Path(payload["build_dir"]).rglob("*.so"))
    return out


def build_eval(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A whole KB evaluation of the add example against its reference (run_and_check args)."""
    import torch

    set_arch(mods, payload["gpu_arch"])
    kb = Path(payload["kb"])
    cand = (kb / ADD_CANDIDATE).read_text()
    ref = (kb / ADD_REFERENCE).read_text()
    device = torch.device(payload["device"])
    start = time.perf_counter()
    static = static_check(mods, cand)
    static_s = time.perf_counter() - start
    start = time.perf_counter()
    result = mods["eval"].eval_kernel_against_ref(
        original_model_src=ref,
        custom_model_src=cand,
        measure_performance=True,
        timing_method=RUN_AND_CHECK["timing_method"],
        verbose=False,
        num_correct_trials=RUN_AND_CHECK["num_correct_trials"],
        num_perf_trials=RUN_AND_CHECK["num_perf_trials"],
        build_dir=payload["build_dir"],
        device=device,
        backend=RUN_AND_CHECK["backend"],
        precision=torch.float32,
    )
    eval_s = time.perf_counter() - start
    res = exec_result(result)
    return {
        "eval_s": eval_s,
        "static_check_s": static_s,
        "static_check": static,
        "correct": bool(res.get("correctness")),
        "compiled": bool(res.get("compiled")),
        "cand_ms": res.get("runtime"),
        "ref_in_eval_ms": res.get("ref_runtime"),
        "kb_result": res,
    }


def cmd_build(args: argparse.Namespace) -> int:
    kb = Path(args.kb).resolve()
    log = log_path(args)
    base = {"kb": str(kb), "gpu_arch": args.gpu_arch, "device": args.device}
    ext_dir = Path(tempfile.mkdtemp(prefix="kbpeer-ext-"))
    eval_dir = Path(tempfile.mkdtemp(prefix="kbpeer-ext-eval-"))
    steps = [
        ("(i) cold build + load (fresh TORCH_EXTENSIONS_DIR)", "build_load", ext_dir, "load_s"),
        ("(ii) cached load, new process", "build_load", ext_dir, "load_s"),
        ("(iii) whole KB evaluation, cold build", "build_eval", eval_dir, "eval_s"),
        ("(iv) whole KB evaluation, cached build", "build_eval", eval_dir, "eval_s"),
    ]
    report: dict[str, Any] = {
        "mode": "build",
        "kb": kb_provenance(kb),
        "env": env_info(),
        "config": {
            **base,
            "eval_args": RUN_AND_CHECK,
            "candidate": ADD_CANDIDATE,
            "reference": ADD_REFERENCE,
        },
        "log": str(log),
        "results": [],
    }
    for label, task, build_dir, key in steps:
        rec = run_worker(task, {**base, "build_dir": str(build_dir)}, log, args.timeout)
        rec["step"] = label
        rec["seconds"] = rec.get(key)
        report["results"].append(rec)
        write_json(args.out, report)
    for d in (ext_dir, eval_dir):
        shutil.rmtree(d, ignore_errors=True)
    print_table(
        ["step", "seconds", "process wall s", "import s", "correct", "error"],
        [
            [
                r["step"],
                r.get("seconds"),
                r.get("process_wall_s"),
                r.get("import_s"),
                r.get("correct"),
                (r.get("error") or "")[:50],
            ]
            for r in report["results"]
        ],
    )
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0
