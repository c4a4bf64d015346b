#!/usr/bin/env bash
# The reference self-speed-up sweep over KernelBench levels 1-3 (docs/benchmarks.md): every
# problem's reference evaluated as its own solution through `bench run` on one GPU
# (benchmarks/sweep.sh, run "h200"), resumable: the results accumulate in gpu-runs/h200 and
# each level is skipped once done. Carry .kb (and gpu-runs, when the machine was given back
# between calls); repeat the call until the row names all three levels (about three calls):
#   bash benchmarks/recipes/reference_sweep.sh
# SWEEP_LEVELS ("1 2 3") picks levels; SWEEP_RUN ("h200") names the run (a fresh run beside an
# older one). Every call leaves gpu-runs in $OUT/gpu-runs.tgz.
# The row: per level, problems correct, wall seconds, |1 - speed-up| (benchmarks/sweep_summary.py).
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
need_kb
recipe_start
run=${SWEEP_RUN:-h200}
mkdir -p gpu-runs
limit 120 python3 -m cuda_agent bench references --problems .kb --levels 1,2,3 --out /tmp/refs \
  >"$OUT/references.log" 2>&1
for level in ${SWEEP_LEVELS:-1 2 3}; do
  bash benchmarks/sweep.sh "$run" "$level" "$((RECIPE_END - 20))"
done
python3 benchmarks/sweep_summary.py gpu-runs >"$OUT/sweep-summary.txt" 2>&1
tar czf "$OUT/gpu-runs.tgz" gpu-runs
grep -A3 "^$run" "$OUT/sweep-summary.txt"
row "reference sweep ($run):" "$(grep "^$run" "$OUT/sweep-summary.txt" | joined)"
