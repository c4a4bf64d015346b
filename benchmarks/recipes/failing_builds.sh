#!/usr/bin/env bash
# Failing builds (docs/benchmarks.md, "Failing builds: the builder against stock
# `load_inline`"): the first N distinct `load_inline` calls of a CUDA-L1 set, each compiled in
# the light layout alone, in the stock layout alone and as the builder does; the verdicts and
# first errors compared. Runnable anywhere with nvcc (it ran on the dev box; nothing runs on a
# GPU); on the device machine one call, carrying .corpus:
#   bash benchmarks/recipes/failing_builds.sh [SET] [N]      SET h20 (or a100), N 10
# On a slow machine give it more time: RECIPE_SECONDS=3600 (the default fits one device call).
# The row: builder = stock on how many units, and the counts of each pair of outcomes.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
set_name=${1:-h20} n=${2:-10}
need ".corpus/cuda-l1/$set_name.jsonl" "CUDA-L1's released kernels (docs/compat.md)"
recipe_start
CUDA_AGENT_CACHE=/tmp/ca-check limit "${RECIPE_SECONDS:-570}" python3 benchmarks/build_cache.py \
  --corpus ".corpus/cuda-l1/$set_name.jsonl" --n "$n" --check --keep-cache \
  --out "$OUT/check-$set_name.jsonl" 2>"$OUT/check-$set_name.err" | tee "$OUT/check-$set_name.txt" |
  grep -v '^{'
row "failing builds, $set_name, $n units:" \
  "$(grep -E "verdict = stock|both build|light fails|both fail|light builds|saved" \
    "$OUT/check-$set_name.txt" | joined)"
