"""Mode ``self-speedup``: each reference problem is its own candidate, through KernelBench.

The candidate is the reference with ``class Model`` renamed ``ModelNew``; KernelBench's
``eval_kernel_against_ref`` (correctness, cuda-event timing, the arguments of
``scripts/run_and_check.py``) and its eager reference timing (``measure_ref_program_time``)
give the speed-up, which should be 1. Problems run in this process (a problem that leaves CUDA
unusable sends the rest to workers) or, with ``--isolate``, each in its own worker. It writes
no solution and changes nothing in the checkout.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kb_peer.kb_calls import RUN_AND_CHECK, exec_result, static_check
from benchmarks.kb_peer.kb_import import env_info, import_kb, kb_provenance
from benchmarks.kb_peer.problems import problem_list, resolve_problem, to_model_new
from benchmarks.kb_peer.report import (
    error_string,
    fmt,
    jsonable,
    log_path,
    output_to,
    positive,
    print_table,
    ratio,
    write_json,
)
from benchmarks.kb_peer.worker import run_worker


def cuda_warmup() -> None:
    import torch

    torch.cuda.init()
    x = torch.randn(512, 512, device="cuda")
    (x @ x).sum().item()
    torch.cuda.synchronize()


def self_one(mods: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """One problem: KB eval of reference-as-candidate, then KB's eager reference timing."""
    import torch

    kb = Path(payload["kb"])
    rec: dict[str, Any] = {"problem": payload["problem"], "repeat": payload.get("repeat", 0)}
    try:
        ref_src = resolve_problem(kb, payload["problem"]).read_text()
        cand_src = to_model_new(ref_src)
    except Exception as exc:
        rec["error"] = error_string(exc)
        return rec
    rec["static_check"] = static_check(mods, cand_src)  # informational (see report notes)
    device = torch.device(payload["device"])
    n_correct, n_perf = payload["num_correct_trials"], payload["num_perf_trials"]
    method = payload["timing_method"]
    precision = mods["eval"].get_torch_dtype_from_string(RUN_AND_CHECK["precision"])

    start = time.perf_counter()
    try:
        result = mods["eval"].eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=cand_src,
            measure_performance=True,
            timing_method=method,
            verbose=False,
            num_correct_trials=n_correct,
            num_perf_trials=n_perf,
            build_dir=payload["build_dir"],
            device=device,
            backend=RUN_AND_CHECK["backend"],
            precision=precision,
            check_for_excessive_speedup=payload["excessive_speedup_check"],
        )
        rec["candidate_wall_s"] = time.perf_counter() - start
        res = exec_result(result)
        rec["kb_result"] = res
        rec["correct"] = bool(res.get("correctness"))
        rec["cand_ms"] = positive(res.get("runtime"))
        rec["ref_in_eval_ms"] = positive(res.get("ref_runtime"))
        meta = res.get("metadata") or {}
        for key in ("compilation_error", "runtime_error", "correctness_issue", "excessive_speedup"):
            if key in meta:
                rec["kb_issue"] = f"{key}: {meta[key]}"[:300]
                break
    except Exception as exc:
        rec["candidate_wall_s"] = time.perf_counter() - start
        rec["error"] = error_string(exc)
        rec["correct"] = False

    start = time.perf_counter()
    try:
        stats = mods["timing"].measure_ref_program_time(
            ref_arch_name=payload["problem"],
            ref_arch_src=ref_src,
            num_trials=n_perf,
            use_torch_compile=False,
            timing_method=method,
            device=device,
            verbose=False,
            precision=RUN_AND_CHECK["precision"],
        )
        rec["ref_wall_s"] = time.perf_counter() - start
        rec["ref_stats"] = jsonable(stats)
        rec["ref_ms"] = stats.get("mean") if stats else None
        if stats is None:
            rec["ref_error"] = "measure_ref_program_time returned None (see log)"
    except Exception as exc:
        rec["ref_wall_s"] = time.perf_counter() - start
        rec["ref_error"] = error_string(exc)
        rec["ref_ms"] = None
    if payload.get("compile_ref"):
        start = time.perf_counter()
        try:
            stats = mods["timing"].measure_ref_program_time(
                ref_arch_name=payload["problem"],
                ref_arch_src=ref_src,
                num_trials=n_perf,
                use_torch_compile=True,
                timing_method=method,
                device=device,
                verbose=False,
                precision=RUN_AND_CHECK["precision"],
            )
            rec["ref_compile_stats"] = jsonable(stats)
            rec["ref_compile_ms"] = stats.get("mean") if stats else None
        except Exception as exc:
            rec["ref_compile_error"] = error_string(exc)
        rec["ref_compile_wall_s"] = time.perf_counter() - start
        rec["speedup_vs_compile"] = (
            ratio(rec.get("ref_compile_ms"), rec.get("cand_ms")) if rec.get("correct") else None
        )
    rec["speedup"] = ratio(rec.get("ref_ms"), rec.get("cand_ms")) if rec.get("correct") else None
    rec["speedup_in_eval"] = (
        ratio(rec.get("ref_in_eval_ms"), rec.get("cand_ms")) if rec.get("correct") else None
    )
    return rec


def cmd_self_speedup(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    problems = problem_list(args)
    if not problems:
        raise SystemExit("no problems given (--problems / --problem-file)")
    log = log_path(args)
    build_root = Path(tempfile.mkdtemp(prefix="kbpeer-self-"))
    config = {
        "num_correct_trials": args.correct_trials,
        "num_perf_trials": args.perf_trials,
        "timing_method": args.timing_method,
        "excessive_speedup_check": not args.no_excessive_speedup_check,
        "device": args.device,
        "isolate": args.isolate,
        "compile_ref": args.compile_ref,
        "repeat": args.repeat,
        "precision": RUN_AND_CHECK["precision"],
    }
    payload_base = {"kb": str(kb.resolve()), **config}
    mods = None
    stubs = None
    if not args.isolate:
        with output_to(log):
            mods = import_kb(kb)
            cuda_warmup()
        stubs = mods["stubs"]
    report: dict[str, Any] = {
        "mode": "self-speedup",
        "kb": kb_provenance(kb, stubs),
        "env": env_info(),
        "config": config,
        "log": str(log),
        "results": [],
    }
    poisoned = False
    for rep in range(args.repeat):
        for i, problem in enumerate(problems):
            payload = {
                **payload_base,
                "problem": problem,
                "repeat": rep,
                "build_dir": str(build_root / f"r{rep}_p{i}"),
            }
            if mods is not None and not poisoned:
                with output_to(log):
                    try:
                        rec = self_one(mods, payload)
                    except Exception as exc:
                        rec = {"problem": problem, "repeat": rep, "error": error_string(exc)}
                    poisoned = not _cuda_usable()
                if poisoned:
                    rec["note"] = "CUDA context unusable afterwards; later problems run isolated"
            else:
                rec = run_worker("self_one", payload, log, args.timeout)
                rec.setdefault("problem", problem)
                rec.setdefault("repeat", rep)
            report["results"].append(rec)
            write_json(args.out, report)
            print(
                f"[{rep}] {problem}: correct={fmt(rec.get('correct'))} "
                f"speedup={fmt(rec.get('speedup'), '.3f')}"
                + (f" error={rec['error'][:120]}" if rec.get("error") else ""),
                file=sys.stderr,
                flush=True,
            )
    shutil.rmtree(build_root, ignore_errors=True)

    headers = [
        "problem",
        "rep",
        "correct",
        "cand ms",
        "ref ms",
        "speedup",
        "ref-in-eval ms",
        "cand wall s",
        "ref wall s",
        "error",
    ]
    rows = [
        [
            r["problem"],
            r.get("repeat"),
            r.get("correct"),
            r.get("cand_ms"),
            r.get("ref_ms"),
            r.get("speedup"),
            r.get("ref_in_eval_ms"),
            r.get("candidate_wall_s"),
            r.get("ref_wall_s"),
            (r.get("error") or r.get("kb_issue") or r.get("ref_error") or "")[:40],
        ]
        for r in report["results"]
    ]
    print_table(headers, rows)
    if args.repeat > 1:
        summary = summarize(report["results"])
        report["summary"] = summary
        print()
        print_table(
            [
                "problem",
                "n",
                "speedup median",
                "speedup min",
                "speedup max",
                "cand ms CV %",
                "cand wall s median",
            ],
            [
                [
                    s["problem"],
                    s["n"],
                    s["speedup_median"],
                    s["speedup_min"],
                    s["speedup_max"],
                    s["cand_ms_cv_pct"],
                    s["cand_wall_s_median"],
                ]
                for s in summary
            ],
        )
    write_json(args.out, report)
    print(f"\nKernelBench output: {log}" + (f"; JSON: {args.out}" if args.out else ""))
    return 0


def _cuda_usable() -> bool:
    try:
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        gc.collect()
        return True
    except Exception:
        return False


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for problem in dict.fromkeys(r["problem"] for r in results):
        rs = [r for r in results if r["problem"] == problem]
        sp = [r["speedup"] for r in rs if r.get("speedup")]
        cand = [r["cand_ms"] for r in rs if r.get("cand_ms")]
        wall = [r["candidate_wall_s"] for r in rs if r.get("candidate_wall_s") is not None]
        cv = None
        if len(cand) > 1 and statistics.mean(cand) > 0:
            cv = 100 * statistics.stdev(cand) / statistics.mean(cand)
        out.append(
            {
                "problem": problem,
                "n": len(rs),
                "speedup_median": statistics.median(sp) if sp else None,
                "speedup_min": min(sp) if sp else None,
                "speedup_max": max(sp) if sp else None,
                "cand_ms_cv_pct": cv,
                "cand_wall_s_median": statistics.median(wall) if wall else None,
            }
        )
    return out
