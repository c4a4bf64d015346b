"""Export on a GPU: a cuda solution exported, pip-installed into a fresh virtual environment, run
under ``torch.compile(fullgraph=True)``, checked against the reference, and its time per call
set beside the runtime the evaluation measured.

Usage (on the GPU host, from the repository root, with PYTHONPATH=src):
  python benchmarks/export_h200.py [--example relu] [--problem ID --solution PATH]
      [--work DIR] [--rounds 100] [--out results.json]

Steps: ``export_solution`` evaluates the solution (cuda backend, standard size, eager and
torch.compile baselines, ``--shapes``) and writes the project; a fresh venv
(``--system-site-packages``, plus this interpreter's site-packages through a ``.pth`` line)
gets it with ``pip install --no-build-isolation --no-deps --no-index``; a script in that venv
(no cuda_agent there) builds ``ModelNew`` and the reference with the same weights, checks eager
and compiled outputs within the problem's tolerance, and times the reference, the eager module
and the compiled module: CUDA events around each call on a fresh clone of the inputs after an
L2 flush (as the evaluator times), and wall-clock time per call (synchronised). The table's
ratio is the compiled module's event time over the evaluated runtime (goal: within 5%).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cuda_agent.core.types import EvalResult

EXAMPLES = {
    "relu": "relu/cuda.py",
    "scale_residual_tanh": "scale_residual_tanh/cuda.py",
    "bias_gelu_scale": "bias_gelu_scale/cuda",
}

MEASURE = r"""
import importlib, json, statistics, sys, time
import torch

name, rounds = sys.argv[1], int(sys.argv[2])
mod = importlib.import_module(name)
ref, verified = mod.reference, mod.VERIFIED
torch.backends.cuda.matmul.allow_tf32 = False  # the evaluation's precision policy (ieee)
torch.backends.cudnn.allow_tf32 = False
device = torch.device("cuda")
torch.manual_seed(0)
with device:
    reference = ref.Model(*ref.get_init_inputs()).eval()
    model = mod.ModelNew(*ref.get_init_inputs()).eval()
    inputs = ref.get_inputs()
model.load_state_dict(reference.state_dict())
compiled = torch.compile(model, fullgraph=True)
tol = verified["tolerance"]
with torch.no_grad():
    expected = reference(*inputs)
    close = lambda out: bool(torch.allclose(out, expected, atol=tol["atol"], rtol=tol["rtol"]))
    checks = {"eager": close(model(*inputs)), "compiled": close(compiled(*inputs))}
flush = torch.empty(
    max(2 * torch.cuda.get_device_properties(device).L2_cache_size // 4, 1 << 20), device=device
)

def fresh():
    args = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    flush.fill_(1.0)
    return args

def events(fn):
    samples = []
    for k in range(rounds + 5):
        args = fresh()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()
        if k >= 5:
            samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)

def wall(fn):
    samples = []
    for k in range(rounds + 5):
        args = fresh()
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        if k >= 5:
            samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)

# wall time per call as a model sees it: calls queued one after another, one synchronisation
# at the end (the CPU side of each call overlaps the GPU work before it); the same inputs
# every call, so L2 may stay warm
def back_to_back(fn):
    args = fresh()
    for _ in range(5):
        fn(*args)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(rounds):
        fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / rounds

with torch.no_grad():
    report = {
        "checks": checks,
        "reference_event_us": events(reference),
        "eager_event_us": events(model),
        "compiled_event_us": events(compiled),
        "eager_wall_us": wall(model),
        "compiled_wall_us": wall(compiled),
        "compiled_back_to_back_us": back_to_back(compiled),
        "gpu": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
    }
print(json.dumps(report))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", default="relu", choices=sorted(EXAMPLES))
    parser.add_argument("--problem", default=None, help="A problem id or file (with --solution).")
    parser.add_argument("--solution", type=Path, default=None)
    parser.add_argument("--work", type=Path, default=None, help="Folder for project and venv.")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.examples import examples_root
    from cuda_agent.export import export_solution, package_name
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.solutions.loader import load_solution

    problem_id = args.problem or args.example
    solution_path = args.solution or examples_root() / EXAMPLES[args.example]
    work = args.work or Path(tempfile.mkdtemp(prefix="export-h200-"))
    problem = resolve_problem(problem_id, "standard")
    opts = EvalOptions(backend="cuda", keep_spare_worker=True).validate()
    name = f"{package_name(problem.id)}_h200"

    started = time.monotonic()
    outcome = export_solution(
        problem, load_solution(solution_path), work / "project", opts, name, _progress
    )
    export_s = time.monotonic() - started
    result = outcome.results[problem.id]
    python = _venv(work / "venv")
    started = time.monotonic()
    _run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(work / "project"),
        ],
        work,
    )
    install_s = time.monotonic() - started
    measured = json.loads(
        _run([str(python), "-c", MEASURE, name, str(args.rounds)], work).strip().splitlines()[-1]
    )
    row = _row(problem.id, solution_path, result, measured, export_s, install_s)
    _print(row, result)
    if args.out:
        args.out.write_text(json.dumps({"row": row, "measured": measured}, indent=1))


def _venv(folder: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)],
        check=True,
    )
    python = folder / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(_run([str(python), "-c", code], folder).strip())
    ours = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    (site / "parent_site.pth").write_text("\n".join(ours) + "\n")
    return python


def _run(command: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{command[:4]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def _row(
    problem_id: str,
    solution: Path,
    result: EvalResult,
    measured: dict[str, Any],
    export_s: float,
    install_s: float,
) -> dict[str, Any]:
    runtime = float(result.runtime_us or 0.0)
    return {
        "problem": problem_id,
        "solution": solution.name,
        "correct_eager": measured["checks"]["eager"],
        "correct_compiled": measured["checks"]["compiled"],
        "generalizes": result.generalizes,
        "evaluated_us": round(runtime, 2),
        "evaluated_eager_us": round(float(result.eager_us or 0.0), 2),
        "reference_us": round(measured["reference_event_us"], 2),
        "package_eager_us": round(measured["eager_event_us"], 2),
        "package_compiled_us": round(measured["compiled_event_us"], 2),
        "compiled_ratio": round(measured["compiled_event_us"] / runtime, 4),
        "eager_ratio": round(measured["eager_event_us"] / runtime, 4),
        "compiled_wall_us": round(measured["compiled_wall_us"], 2),
        "compiled_back_to_back_us": round(measured["compiled_back_to_back_us"], 2),
        "back_to_back_ratio": round(measured["compiled_back_to_back_us"] / runtime, 4),
        "eager_wall_us": round(measured["eager_wall_us"], 2),
        "export_s": round(export_s, 1),
        "install_s": round(install_s, 1),
        "gpu": measured["gpu"],
    }


def _print(row: dict[str, Any], result: EvalResult) -> None:
    print(
        f"GPU {row['gpu']}; export (evaluation with --shapes) {row['export_s']} s, "
        f"pip install {row['install_s']} s; generalizes: {row['generalizes']}"
    )
    shapes = result.details.shapes or []
    print("sizes: " + ", ".join(f"{s['label']} {s['verdict']}" for s in shapes))
    print(
        "| problem | correct (eager, compiled) | evaluated us | package eager us | "
        "package compiled us | compiled / evaluated | compiled wall us (synchronised, "
        "back to back) | reference us |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {row['problem']} | {row['correct_eager']}, {row['correct_compiled']} | "
        f"{row['evaluated_us']} | {row['package_eager_us']} | {row['package_compiled_us']} | "
        f"{row['compiled_ratio']:.3f} | {row['compiled_wall_us']}, "
        f"{row['compiled_back_to_back_us']} | {row['reference_us']} |"
    )
    ok = row["correct_compiled"] and abs(row["compiled_ratio"] - 1.0) <= 0.05
    print(
        f"goal (correct, compiled time within 5% of the evaluated runtime): "
        f"{'met' if ok else 'NOT met'}"
    )


def _progress(stage: str, text: str) -> None:
    print(f"  [{stage}] {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
