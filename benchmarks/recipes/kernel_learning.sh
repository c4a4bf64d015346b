#!/usr/bin/env bash
# Does Qwen2.5-Coder learn to write kernels? Base, RFT and RFT+GRPO on the same held-out problems
# (docs/benchmarks.md "The kernel rungs"), in parts that each fit one 10-minute device call of
# one lease (the machine keeps /tmp between them):
#   bash benchmarks/recipes/kernel_curve.sh receive       x N: the carried .qwen chunks kept
#   bash benchmarks/recipes/kernel_curve.sh setup         wheels and model installed, converted
#   bash benchmarks/recipes/kernel_learning.sh heldout base    the base model's held-out replies
#   bash benchmarks/recipes/kernel_learning.sh heldout null    the same sampling, another seed
#   bash benchmarks/recipes/kernel_learning.sh heldout greedy  the base at temperature 0
#   bash benchmarks/recipes/kernel_learning.sh rft        sample the train split, fine-tune
#   bash benchmarks/recipes/kernel_learning.sh heldout rft
#   bash benchmarks/recipes/kernel_learning.sh learnable  the RFT model sampled over the train
#                                                         split: its own learnable problems
#   bash benchmarks/recipes/kernel_learning.sh rft2       the second round: the base fine-tuned
#                                                         on both samples' passing replies
#   bash benchmarks/recipes/kernel_learning.sh heldout rft2
#   bash benchmarks/recipes/kernel_learning.sh teacher    the stronger model (LEARN_TEACHER,
#                                                         qwen-coder-1.5b) sampled over the train
#                                                         split: replies the 0.5B cannot make
#   bash benchmarks/recipes/kernel_learning.sh mixed      the base fine-tuned on the passing
#                                                         replies of the base, the RFT model and
#                                                         the teacher
#   bash benchmarks/recipes/kernel_learning.sh heldout mixed
#   bash benchmarks/recipes/kernel_learning.sh reference  the curriculum's own short kernels of
#                                                         the train split (every family; a warp
#                                                         per row for row problems), scored
#   bash benchmarks/recipes/kernel_learning.sh cold       the base fine-tuned on its own passes
#                                                         and the passing references; heldout cold
#   bash benchmarks/recipes/kernel_learning.sh heldout teacher   the teacher's own row
#   bash benchmarks/recipes/kernel_learning.sh teacher-rft   the teacher fine-tuned on its own
#                                                         passing replies; heldout teacher-rft
#   bash benchmarks/recipes/kernel_learning.sh grpo       GRPO from the RFT model until the deadline
#   bash benchmarks/recipes/kernel_learning.sh heldout grpo
#   bash benchmarks/recipes/kernel_learning.sh report     the table (also after any heldout)
#   bash benchmarks/recipes/kernel_learning.sh smoke      every phase on a few problems (a check
#                                                         that the recipe runs end to end)
#   bash benchmarks/recipes/kernel_learning.sh restore    (carry .learn-state) the state an
#                                                         earlier lease brought back, put in place;
#                                                         without .learn-state, the committed
#                                                         benchmarks/state/kernel-learning.tgz
# After every phase the state's small files (held-out replies, samples, verdicts, learnable
# set, summaries; not the models) are packed into $OUT/learn-state.tgz, so a later lease can
# start from them (unpack it here as .learn-state, ignored by git; carry it with `restore`).
# Both models carried at once: `qwen_carry.sh prepare qwen-coder-0.5b qwen-coder-1.5b`, then
# `CURVE_MODELS="qwen-coder-0.5b qwen-coder-1.5b" kernel_curve.sh setup`.
# LEARN_MODEL (qwen-coder-0.5b), LEARN_TEACHER (qwen-coder-1.5b), LEARN_TASK (kernel),
# LEARN_JOBS (12), LEARN_ARGS (more arguments of benchmarks/kernel_learning.py) set the run
# (arms sampled with other settings go to a folder of their own: LEARN_ARGS="--max-new-tokens
# 512 --heldout-folder heldout-512" for `heldout base`, `heldout cold` and `report`).
# A line every 15 s names what holds the GPU. The row: the phase's last lines.
set -u -o pipefail
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
# shellcheck disable=SC2206
ARGS=(--model "${LEARN_MODEL:-qwen-coder-0.5b}" --teacher "${LEARN_TEACHER:-qwen-coder-1.5b}"
  --task "${LEARN_TASK:-kernel}" --backend cuda
  --jobs "${LEARN_JOBS:-12}" --state /tmp/learn-state --out "$OUT/learning" ${LEARN_ARGS:-})
run() {
  limit 590 python3 benchmarks/kernel_learning.py "$@" "${ARGS[@]}" --deadline "$RECIPE_END" \
    2>&1 | tee -a "$OUT/learning.log" | quiet | tail -60
  local code=$?
  keep_state
  return $code
}
keep_state() { # one archive: the device tool brings back only a few files per call
  (cd /tmp/learn-state 2>/dev/null &&
    find . \( -path ./rft/model -o -path ./rft2/model -o -path ./mixed/model -o -path ./cold/model \
      -o -path ./grpo/model -o -path ./teacher-rft/model \
      -o -path '*/trainer' \) \
      -prune -o -type f \( -name '*.json' -o -name '*.jsonl' \) -print |
    tar czf "$OUT/learn-state.tgz" -T -)
}
case "${1:-}" in
rft | learnable | teacher | teacher-rft | reference | rft2 | mixed | cold | grpo | report)
  recipe_start
  run "$1"
  row "kernel learning, $1:" "$(quiet <"$OUT/learning.log" | tail -3 | joined)"
  ;;
heldout)
  recipe_start
  run heldout "${2:?heldout ARM: one of the ARMS of benchmarks/kernel_learning.py}"
  run report
  row "kernel learning, heldout $2:" "$(quiet <"$OUT/learning.log" | grep held-out | tail -1)"
  ;;
restore) # the carried .learn-state, else the committed benchmarks/state/kernel-learning.tgz
  mkdir -p /tmp/learn-state
  if [ -d .learn-state ]; then
    cp -r .learn-state/. /tmp/learn-state/
  else
    need benchmarks/state/kernel-learning.tgz "the learn-state an earlier lease brought back"
    tar xzf benchmarks/state/kernel-learning.tgz -C /tmp/learn-state
  fi
  row "kernel learning state restored:" "$(cd /tmp/learn-state && find . -type f | sort | joined)"
  ;;
smoke)
  recipe_start
  SMOKE=(--n-train 16 --n-heldout 8 --heldout-limit 4 --train-samples 4
    --samples 2 --sft-max-steps 2 --steps 2 --rollouts 16 --micro-batch 16 --max-new-tokens 256)
  for phase in "heldout base" rft "heldout rft" learnable rft2 "heldout rft2" grpo \
    "heldout grpo" report; do
    # shellcheck disable=SC2086
    run $phase "${SMOKE[@]}" || { row "kernel learning smoke: $phase failed"; exit 1; }
  done
  row "kernel learning smoke:" "$(quiet <"$OUT/learning.log" | grep -E "held-out|grpo:|fine-tuned" | joined)"
  ;;
*)
  echo "usage: $0 rft|learnable|teacher|teacher-rft|reference|rft2|mixed|cold|heldout ARM" \
    "|grpo|report|smoke|restore" >&2
  exit 2
  ;;
esac
