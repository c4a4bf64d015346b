"""One endless kernel among honest ones on a device that several jobs share: how long each takes.

Usage: python benchmarks/shared_gpu_hang.py [--backend cuda] [--jobs 8] [--honest 15]

The scene of the kernel-learning run on the H200 (2026-12-04): a model's reply whose kernel
never ends, scored with 16 jobs on one GPU. The endless kernel keeps the device's shared turn;
every job that has verified waits for the device alone (to record its kernels or to time), and
every new one waits behind those. The device budget stops the endless one; until it does, no
verdict comes. While the pool multiplied the budget by its jobs per device, that was jobs x
the budget (16 x about 60 s); now the budget's clock stands only while a worker waits for its
turn, and the endless kernel is stopped after its own budget.

The problems are the curriculum's first elementwise training problems, each answered with its
correct kernel (``rl.curriculum.reference.reference_kernel``), and the first one once more
with a kernel that never ends; all scored untimed (every check of the policy, no speed-up) on
a ``LocalPool`` of ``--jobs`` jobs on the device, as ``train rft`` scores a sample. A line
comes with every verdict and at least every 15 s while none does; the table is printed last:
each verdict, its seconds from the start, and the whole run's seconds.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

# reads x[0] until it changes, which it never does: a volatile load of global memory, which no
# compiler may drop (a loop on a volatile local was: ptxas removed it, and the kernel returned)
SPIN = """\
__global__ void elementwise_kernel(const float* x, float* y, int64_t n) {
  const volatile float* first = x;
  const float seen = *first;
  while (*first == seen) {
  }
}

extern "C" cudaError_t elementwise_launch(const float* x, float* y, int64_t n,
                                          cudaStream_t stream) {
  elementwise_kernel<<<1, 32, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}
"""
SPIN_CPU = """\
extern "C" void elementwise_launch(const float* x, float* y, int64_t n) {
  volatile int forever = 1;
  while (forever) {
  }
}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--jobs", type=int, default=8, help="jobs sharing the device")
    parser.add_argument("--honest", type=int, default=15, help="correct kernels beside it")
    args = parser.parse_args(argv)

    from cuda_agent.core.details import EvalDetails
    from cuda_agent.evaluator.options import EvalOptions
    from cuda_agent.evaluator.pipeline import evaluate
    from cuda_agent.problems.sets import resolve_problem
    from cuda_agent.rl.curriculum.problem_set import curriculum_folder
    from cuda_agent.rl.curriculum.reference import reference_kernel
    from cuda_agent.rl.curriculum.sampling import split_prompts
    from cuda_agent.rl.curriculum.scoring import Score, pooled_evaluator, score_batch
    from cuda_agent.rl.curriculum.verdicts import verdict_of

    folder = curriculum_folder(None, {"size": "small", "families": ["elementwise"]})
    prompted = split_prompts("kernel", folder, "train", args.backend, args.honest)
    if not prompted:
        raise SystemExit(f"no elementwise training problems in {folder}")
    fence = "cuda" if args.backend == "cuda" else "cpp"
    kernels = [reference_kernel(resolve_problem(p.spec), args.backend) for p in prompted]
    specs = [prompted[0].spec] + [p.spec for p in prompted]
    spin = SPIN if args.backend == "cuda" else SPIN_CPU
    replies = [f"```{fence}\n{code}```" for code in [spin, *kernels]]
    names = ["endless kernel"] + [f"correct kernel {i + 1}" for i in range(len(kernels))]
    options = EvalOptions(backend=args.backend, baselines=())
    began = time.monotonic()
    done: list[tuple[str, float, Score]] = []
    finished = threading.Event()

    def scored(index: int, score: Score) -> None:
        seconds = time.monotonic() - began
        done.append((names[index], seconds, score))
        verdict = verdict_of(score)
        print(
            f"[{seconds:6.1f} s] {names[index]}: {verdict.outcome} {list(verdict.flags)}",
            flush=True,
        )

    def ticker() -> None:
        while not finished.wait(15.0):
            print(
                f"[{time.monotonic() - began:6.1f} s] {len(done)} of {len(replies)} "
                f"verdicts so far ({args.jobs} jobs on the device)",
                flush=True,
            )

    threading.Thread(target=ticker, daemon=True).start()
    with pooled_evaluator(args.backend, args.jobs, evaluate) as scorer:
        score_batch("kernel", specs, replies, args.backend, options, scorer, args.jobs, scored)
    finished.set()
    total = time.monotonic() - began
    print("\n| reply | outcome | flags | budget s | turn wait s | done at s |")
    print("|---|---|---|---|---|---|")
    for name, seconds, score in sorted(done, key=lambda row: row[1]):
        parent = score.result.details if score.result is not None else EvalDetails()
        verdict = verdict_of(score)
        budget, wait = parent.device_budget_s, parent.turn_wait_s
        print(
            f"| {name} | {verdict.outcome} | {', '.join(verdict.flags) or '-'} | "
            f"{'-' if budget is None else budget} | {'-' if wait is None else wait} | "
            f"{seconds:.1f} |"
        )
    print(f"\n{len(replies)} verdicts with {args.jobs} jobs on one device in {total:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
