"""The static half of a synthesis run, again: compose seeds and score them against a benchmark.

Recomputes, for seeds ``--seed .. --seed+n-1``, what ``cuda-agent synth`` decides before any
execution (well-formed, unique, decontaminated), with the same torch (the catalogue is crawled
from it, so run this on the machine of the run), and prints the similarity distribution as
JSON. Used when a run's own ``stats.json`` was not kept; the count of ``unique`` rejections
cross-checks that the candidates are the same as the run's.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter

from cuda_agent.synth.compose import ScaleProfile, compose
from cuda_agent.synth.decontam import Decontaminator
from cuda_agent.synth.export import similarity_stats
from cuda_agent.synth.filters import StaticFilters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", default="gpu")
    parser.add_argument(
        "--against", required=True, help="the benchmark set (a KernelBench checkout)"
    )
    parser.add_argument("--threshold", type=float, default=0.9)
    args = parser.parse_args()
    start = time.perf_counter()
    filters = StaticFilters(Decontaminator.from_problem_set(args.against), args.threshold)
    rows, rejected = [], Counter()
    for seed in range(args.seed, args.seed + args.n):
        candidate = compose(seed, scale=ScaleProfile.named(args.scale))
        verdict = filters.check(candidate.id, candidate.source)
        if not verdict.passed:
            rejected[verdict.filter] += 1
        rows.append({"similarity": verdict.similarity, "closest": verdict.closest})
    closest = Counter(r["closest"] for r in rows if r["closest"])
    print(
        json.dumps(
            {
                "candidates": args.n,
                "rejected": dict(rejected),
                "similarity": similarity_stats(rows, args.threshold),
                "most_often_closest": closest.most_common(5),
                "seconds": round(time.perf_counter() - start, 1),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
