"""The modes that need no GPU: ``transform`` (print the ModelNew transform of some problems)
and ``preflight`` (import KernelBench's evaluator, report its provenance, versions and stubs).
Neither evaluates anything.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.kb_peer.kb_import import env_info, import_kb, kb_provenance
from benchmarks.kb_peer.problems import problem_list, resolve_problem, to_model_new
from benchmarks.kb_peer.report import error_string, jsonable, log_path, output_to, write_json


def cmd_transform(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    for problem in problem_list(args):
        try:
            src = to_model_new(resolve_problem(kb, problem).read_text())
            lines = [ln for ln in src.splitlines() if "ModelNew" in ln]
            print(f"{problem}:")
            for ln in lines:
                print(f"    {ln.strip()}")
        except Exception as exc:
            print(f"{problem}: ERROR {error_string(exc)}")
    return 0


def cmd_preflight(args: argparse.Namespace) -> int:
    kb = Path(args.kb)
    log = log_path(args)
    with output_to(log):
        mods = import_kb(kb)
    info = {
        "kb": kb_provenance(kb, mods["stubs"]),
        "env": env_info(),
        "eval_kernel_against_ref": callable(mods["eval"].eval_kernel_against_ref),
        "measure_ref_program_time": callable(mods["timing"].measure_ref_program_time),
    }
    print(json.dumps(jsonable(info), indent=2))
    write_json(args.out, info)
    return 0
