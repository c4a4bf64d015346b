#!/usr/bin/env bash
# One level of the reference-as-solution sweep, resumable, inside a wall-clock deadline:
#   bash benchmarks/sweep.sh MODE LEVEL DEADLINE_EPOCH
# MODE names the run (e.g. "one" for one visible GPU, "two" for two) and its own cache, so two
# modes never share baselines or builds. Results go to gpu-runs/MODE/L<LEVEL> (bench run's
# results.jsonl, appended as problems finish; a rerun skips what is done); every segment's
# start, end and exit status is appended to gpu-runs/times.jsonl. Needs /tmp/refs (bench
# references) and a KernelBench checkout in .kb/. SWEEP_EXTRA adds options to `bench run`
# (e.g. "--ray local" for the RayPool runs of recipes/two_gpus.sh ray).
set -u
mode=$1 level=$2 deadline=$3
run="gpu-runs/$mode/L$level"
mkdir -p "gpu-runs/$mode"
[ -f "$run/.done" ] && exit 0
left=$((deadline - $(date +%s)))
[ "$left" -le 10 ] && exit 0
start=$(date +%s.%N)
CUDA_AGENT_CACHE="/tmp/ca-cache-$mode" timeout "$left" python3 -m cuda_agent bench run \
  --problems .kb --levels "$level" --solutions /tmp/refs --backend cuda --baselines eager \
  --policy off --out "$run" ${SWEEP_EXTRA:-} >>"gpu-runs/$mode-L$level.log" 2>&1
status=$?
end=$(date +%s.%N)
[ "$status" -eq 0 ] && touch "$run/.done"
printf '{"mode": "%s", "level": %s, "start": %s, "end": %s, "exit": %s, "gpus": "%s"}\n' \
  "$mode" "$level" "$start" "$end" "$status" "${CUDA_VISIBLE_DEVICES:-all}" >>gpu-runs/times.jsonl
