#!/usr/bin/env bash
# One evaluation, end to end (docs/benchmarks.md): examples/bias_gelu_scale/cuda evaluated from
# source to score (build, correctness trials, kernel record, timing against eager, stream
# cross-check) cold, after a kernel edit, and unchanged twice (benchmarks/eval_latency.py).
# One call on nvidia-h200:
#   bash benchmarks/recipes/eval_latency.sh
# The row: each run's wall, build and worker seconds.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
limit 400 python3 benchmarks/eval_latency.py --backend cuda --runs "${EVAL_RUNS:-3}" \
  2>"$OUT/eval_latency.err" | tee "$OUT/eval_latency.txt"
runs=$(sed -n '/^run .*wall s/,$p' "$OUT/eval_latency.txt" | tail -n +2 | grep -v "^worker phases")
row "one evaluation (run / wall s / build s / worker s / correct):" "$(joined <<<"$runs")"
