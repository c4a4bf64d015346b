#!/usr/bin/env bash
# The public corpus through `bench run` (docs/benchmarks.md), and the KernelBench compatibility
# suite (docs/compat.md): CUDA-L1's sets (.corpus/cuda-l1/SET.jsonl) judged by ours, `bench run
# --policy kernelbench --baselines eager`, on GPU 0 (benchmarks/compat/gpu.sh), with
# KernelBench's own evaluator on GPU 1 when COMPAT_KB=1 (an nvidia-h200-x2 machine; the default
# 0 runs ours alone on one GPU). Resumable: carry gpu-runs .kb .corpus (and .whl for
# KernelBench's side) and repeat the call until every solution has a verdict (the summary says
# how many are left):
#   COMPAT_SETS=h20 COMPAT_RUN=ours-2j COMPAT_BENCH_ARGS="--jobs-per-gpu 3" \
#     bash benchmarks/recipes/public_corpus.sh
# COMPAT_SECONDS: seconds until the deadline (default: the call's time less 30 s); COMPAT_SETS
# ("h20"), COMPAT_RUN, COMPAT_BENCH_ARGS, COMPAT_OURS_GPUS, COMPAT_POLICY, KB_JOBS:
# as benchmarks/compat/gpu.sh reads them. Every call leaves gpu-runs/compat in $OUT/compat.tgz.
# The row: per set, ours' wall time over all calls and the verdict counts.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
need_kb
recipe_start
export COMPAT_KB=${COMPAT_KB:-0}
[ "$COMPAT_KB" = 0 ] || wheels_install
read -r -a sets <<<"${COMPAT_SETS:-h20}"
deadline=$((RECIPE_END - 30))
[ -n "${COMPAT_SECONDS:-}" ] && deadline=$(($(date +%s) + COMPAT_SECONDS))
KB_SITE=/tmp/site bash benchmarks/compat/gpu.sh "$deadline" "${sets[@]}" \
  2>&1 | tee "$OUT/public_corpus.txt" | cut -c1-300
tar czf "$OUT/compat.tgz" gpu-runs/compat 2>/dev/null
row "public corpus (${sets[*]}):" "$(grep -vE '^\||^\{|^\s*$' "$OUT/public_corpus.txt" |
  grep -iE "wall|verdict|correct|left" | cut -c1-200 | joined)"
