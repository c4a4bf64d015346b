#!/usr/bin/env bash
# Two GPUs: LocalPool and RayPool (docs/benchmarks.md), on an nvidia-h200-x2 machine, carrying
# .kb (and gpu-runs between calls; .raybundle for the Ray stages: `python3
# benchmarks/ray_bundle.py build` here makes .raybundle/ray-*-cp312.tar.xz). Levels 1-2's
# references as solutions through `bench run` (benchmarks/sweep.sh), each stage resumable
# (repeat it until its levels are done; SWEEP_LEVELS, default "1 2"):
#   bash benchmarks/recipes/two_gpus.sh two       LocalPool on both GPUs (run "two")
#   bash benchmarks/recipes/two_gpus.sh one       LocalPool on GPU 0 alone (run "one")
#   bash benchmarks/recipes/two_gpus.sh ray       RayPool (`--ray local`, run "ray2"), after the
#                                                 bundle's smoke test (one GPU actor per GPU)
#   bash benchmarks/recipes/two_gpus.sh fault     the fault drill: a GPU actor SIGKILLed mid-run
#                                                 (FAULT_LIMIT 30 problems, FAULT_AFTER 25 s)
#   bash benchmarks/recipes/two_gpus.sh overhead  benchmarks/pool_overhead.py, both pools
# Every call leaves gpu-runs in $OUT/gpu-runs.tgz and Ray's logs in $OUT/ray-logs.tgz.
# The row: the one-against-two ratio and RayPool against LocalPool (benchmarks/sweep_summary.py),
# or the drill's outcome.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
need_kb
recipe_start
ray_env() {  # the Ray bundle unpacked into /tmp/ray-site and put on PYTHONPATH
  local bundle
  bundle=$(ls .raybundle/ray-*-cp312.tar.xz 2>/dev/null | tail -1)
  need "${bundle:-.raybundle/ray-VERSION-cp312.tar.xz}" "python3 benchmarks/ray_bundle.py build"
  # exit 1: unpacked, but a dependency left to the image is missing or too old (printed); go
  # on: the smoke test says whether Ray minds
  python3 benchmarks/ray_bundle.py unpack "$bundle" --target /tmp/ray-site
  [ $? -le 1 ] || exit 1
  # Ray's memory monitor kills workers past 95% of what it reads as the host's memory; here
  # memory starts small and grows as used, and LocalPool has no such killer: leave it off.
  export PYTHONPATH="/tmp/ray-site:$PYTHONPATH" RAY_USAGE_STATS_ENABLED=0 \
    RAY_memory_monitor_refresh_ms=0
  RECIPE_CLEANUP='tar czf "$OUT/ray-logs.tgz" -C /tmp/ray/session_latest logs 2>/dev/null'
}
sweep() {  # sweep RUN: levels $SWEEP_LEVELS of the reference sweep under run RUN
  limit 120 python3 -m cuda_agent bench references --problems .kb --levels 1,2 --out /tmp/refs \
    >"$OUT/references.log" 2>&1
  for level in ${SWEEP_LEVELS:-1 2}; do
    bash benchmarks/sweep.sh "$1" "$level" "$((RECIPE_END - 30))"
  done
  python3 benchmarks/sweep_summary.py gpu-runs >"$OUT/sweep-summary.txt" 2>&1
  tar czf "$OUT/gpu-runs.tgz" gpu-runs
  grep -A3 -E "^$1/|^(one|two|ray2|local2)" "$OUT/sweep-summary.txt" | head -30
  row "two GPUs ($1):" "$(grep -E "^$1|ratio|LocalPool|RayPool" "$OUT/sweep-summary.txt" | joined)"
}
mkdir -p gpu-runs
case "${1:-}" in
two)
  sweep two
  ;;
one)
  export CUDA_VISIBLE_DEVICES=0
  sweep one
  ;;
ray)
  ray_env
  if [ ! -f gpu-runs/.ray_smoke_ok ]; then
    limit 180 python3 benchmarks/ray_bundle.py smoke --gpus 2 >"$OUT/ray_smoke.txt" 2>&1
    quiet <"$OUT/ray_smoke.txt" | tail -12
    grep -q "^smoke ok" "$OUT/ray_smoke.txt" || exit 1
    touch gpu-runs/.ray_smoke_ok
  fi
  SWEEP_EXTRA="--ray local" sweep ray2
  grep -h -E "actor .* died|pool failed" gpu-runs/ray2-L*.log | tail -5
  ;;
fault)
  ray_env
  limit 120 python3 -m cuda_agent bench references --problems .kb --levels 1 --out /tmp/refs \
    >"$OUT/references.log" 2>&1
  limit 300 python3 benchmarks/ray_fault.py --problems .kb --levels 1 --solutions /tmp/refs \
    --backend cuda --limit "${FAULT_LIMIT:-30}" --kill-after "${FAULT_AFTER:-25}" --how signal \
    --out "$OUT/fault" >"$OUT/fault.txt" 2>&1
  echo "fault drill exit $?"
  quiet <"$OUT/fault.txt" | grep -v -E "^\s|^The actor|^\(raylet\)" | tail -12
  tar czf "$OUT/fault.tgz" -C "$OUT" fault && rm -rf "$OUT/fault"
  row "fault drill:" \
    "$(grep -iE "fault drill|restart|correct|wall" "$OUT/fault.txt" | tail -4 | joined)"
  ;;
overhead)
  ray_env
  limit 540 python3 benchmarks/pool_overhead.py --backend cuda --jobs 8 \
    --json "$OUT/pool_overhead.json" >"$OUT/pool_overhead.txt" 2>&1
  quiet <"$OUT/pool_overhead.txt" | tail -16
  row "pool overhead:" "$(quiet <"$OUT/pool_overhead.txt" | tail -4 | joined)"
  ;;
*)
  echo "usage: $0 two|one|ray|fault|overhead" >&2
  exit 2
  ;;
esac
