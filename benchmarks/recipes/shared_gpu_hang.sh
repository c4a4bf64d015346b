#!/usr/bin/env bash
# One kernel that never ends among correct ones, on one GPU that HANG_JOBS (16) jobs share
# (benchmarks/shared_gpu_hang.py; docs/benchmarks.md "Worker start-up and verdict throughput"):
# every verdict's time, and the run's. One call, no carried files.
# The row: how many verdicts in how many seconds, and the endless kernel's verdict.
set -u -o pipefail
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
limit "${HANG_SECONDS:-540}" python3 benchmarks/shared_gpu_hang.py --jobs "${HANG_JOBS:-16}" \
  --honest "${HANG_HONEST:-31}" 2>&1 | tee "$OUT/shared_gpu_hang.log" | quiet | tail -45
row "shared GPU, one endless kernel:" \
  "$(grep -E "verdicts with|\| endless" "$OUT/shared_gpu_hang.log" | joined)"
