#!/usr/bin/env bash
# A single `cuda-agent eval` from the command line (docs/benchmarks.md): the wall time of one
# call alone (--no-service) and with `cuda-agent serve` keeping a worker ready, after one call
# that fills the caches (benchmarks/eval_cli_latency.py). One call:
#   bash benchmarks/recipes/eval_cli.sh cuda     on the device (nvidia-h200), GPU 0
#   bash benchmarks/recipes/eval_cli.sh cpu      runnable anywhere (the dev-box rows)
# The row: the median of each mode, and `--version`.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
backend=${1:-cuda}
case "$backend" in
cuda|cpu) ;;
*)
  echo "usage: $0 cuda|cpu" >&2
  exit 2
  ;;
esac
recipe_start
CUDA_VISIBLE_DEVICES=0 limit 540 python3 benchmarks/eval_cli_latency.py --backend "$backend" \
  --runs "${EVAL_RUNS:-3}" 2>"$OUT/eval_cli.err" | tee "$OUT/eval_cli.txt"
row "single eval from the CLI, $backend:" \
  "$(grep -iE "^median|version|cold|first" "$OUT/eval_cli.txt" | joined)"
