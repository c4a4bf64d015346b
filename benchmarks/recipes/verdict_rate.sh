#!/usr/bin/env bash
# Verdicts per H200-hour on a public corpus, and where each verdict's device time goes
# (docs/benchmarks.md, "Verdicts per device-hour"): the first RATE_N (60) solutions of the
# prepared set RATE_SET (default .corpus/technoabsurdist; RATE_INTERLEAVE=1 takes them from its
# levels in turn, benchmarks/corpus_subset.py) through
#   bench run --backend cuda --policy kernelbench --jobs-per-gpu JOBS [ARGS]
# once per run named in RATE_RUNS ("TREE:NAME:JOBS:SECONDS[:ARGS] ...", default
# ".:after:3:300"): TREE is a source tree holding src/ (`.`, this checkout; another commit's src
# as carried, e.g. `.before` from `git archive COMMIT src | tar -x -C .before`); ARGS are more
# `bench run` arguments joined by `+` (`--no-memory-check`); each run with its own cold caches
# (builds, inductor, Triton, extensions, memory checks) and the GPU's utilisation sampled every
# 0.5 s; then benchmarks/verdict_rate.py over the runs (the first two compared verdict by
# verdict).
#   RATE_RUNS=".before:before:3:330 .:after:3:200" bash benchmarks/recipes/verdict_rate.sh
#   RATE_SET=.corpus/technoabsurdist-all RATE_INTERLEAVE=1 RATE_RUNS=".:on:3:130 \
#     .:off:3:130:--no-memory-check" bash benchmarks/recipes/verdict_rate.sh
# (carry .corpus, and the other tree). A run cut at its SECONDS counts the verdicts it gave.
# RATE_BACKEND=cpu runs the same steps on a machine without a GPU (a check of the recipe).
# The row: per run, verdicts, wall, verdicts per hour, GPU busy, held alone; same verdicts.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
set_dir=${RATE_SET:-.corpus/technoabsurdist}
need "$set_dir" "the prepared set, as docs/compat.md says"
recipe_start
order=()
[ "${RATE_INTERLEAVE:-0}" = 1 ] && order=(--interleave)
python3 benchmarks/corpus_subset.py "$set_dir" "${RATE_N:-60}" /tmp/rate-set "${order[@]}" \
  >/dev/null
specs=()
for run in ${RATE_RUNS:-.:after:3:300}; do
  IFS=: read -r tree name jobs seconds extra <<<"$run"
  read -r -a more <<<"${extra//+/ }"
  need "$tree/src/cuda_agent" "a source tree to run (see the header)"
  rm -rf "gpu-runs/rate-$name" "/tmp/ca-$name" "/tmp/ind-$name" "/tmp/tri-$name" "/tmp/ext-$name"
  mkdir -p gpu-runs
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 \
    >"$OUT/util-$name.txt" 2>/dev/null &
  sampler=$!
  began=$(date +%s.%N)
  echo "[$(date +%T)] run $name: tree $tree, --jobs-per-gpu $jobs ${more[*]}, at most $seconds s"
  PYTHONPATH="$PWD/$tree/src:$PWD:/tmp/site" CUDA_AGENT_CACHE="/tmp/ca-$name" \
    TORCHINDUCTOR_CACHE_DIR="/tmp/ind-$name" TRITON_CACHE_DIR="/tmp/tri-$name" \
    TORCH_EXTENSIONS_DIR="/tmp/ext-$name" limit "$seconds" python3 -m cuda_agent bench run \
    --problems /tmp/rate-set/problems --solutions /tmp/rate-set/solutions --backend "${RATE_BACKEND:-cuda}" \
    --policy kernelbench --jobs-per-gpu "$jobs" --out "gpu-runs/rate-$name" "${more[@]}" \
    >"$OUT/run-$name.log" 2>&1
  rc=$?
  echo "[$(date +%T)] run $name ended with status $rc"
  wall=$(python3 -c "import sys, time; print(round(time.time() - float(sys.argv[1]), 1))" "$began")
  kill "$sampler" 2>/dev/null
  grep -E "devices held|verdicts|correct" "$OUT/run-$name.log" | tail -3 | cut -c1-400
  cp "gpu-runs/rate-$name/results.jsonl" "$OUT/results-$name.jsonl" 2>/dev/null
  cp "gpu-runs/rate-$name/run.json" "$OUT/run-$name.json" 2>/dev/null
  specs+=("gpu-runs/rate-$name:$wall:$OUT/util-$name.txt")
done
python3 benchmarks/verdict_rate.py "${specs[@]}" | tee "$OUT/verdict_rate.txt"
# the device tool brings back at most 8 files: the runs' logs and results in one archive
(cd "$OUT" && tar czf verdict-rate-runs.tgz util-*.txt run-*.log results-*.jsonl run-*.json \
  2>/dev/null && rm -f util-*.txt run-*.log results-*.jsonl run-*.json)
row "verdicts per hour:" "$(python3 - "$OUT/verdict_rate.txt" <<'PY'
import json, sys
data = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
parts = [
    f"{r['run']} {r['verdicts']} verdicts ({r['correct']} correct) in {r['wall_s']:.0f} s = "
    f"{r['per_hour']}/h, gpu busy {r['gpu_busy']}, alone {r['exclusive_fraction']}"
    for r in data["runs"]
]
if "same_verdicts" in data:
    parts.append(f"same verdicts {data['same_verdicts']} of {data['judged_by_both']}")
print(" ; ".join(parts))
PY
)"
