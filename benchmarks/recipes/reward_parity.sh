#!/usr/bin/env bash
# Reward parity with KernelBench on one H200 (docs/compat.md, "Same-GPU parity"), in parts that
# each fit one 10-minute device call; the machine keeps its files between calls of one lease,
# and every part leaves its results under $OUT too:
#   bash benchmarks/recipes/reward_parity.sh tests      the GPU tests (recipes/gpu_tests.sh)
#   bash benchmarks/recipes/reward_parity.sh memcost    the memory check's cost on the bundled
#                                                        CUDA examples (recipes/memory_check.sh)
#   bash benchmarks/recipes/reward_parity.sh corpus SET KB [SECONDS] [BACKEND]
#        ours (`bench run --policy kernelbench --jobs-per-gpu 3`) and KernelBench's evaluator
#        (BACKEND cuda or triton, checkout KB) over the prepared set SET, side by side on GPU 0.
#        Both sides run detached (common.sh `detached`): they outlive the call and go on until
#        LIFETIME (default 1800 s, a session's device time) has passed or the machine goes
#        back, so no evaluation longer than a call is cut at the call's end; the call watches
#        them for SECONDS (default 420: the wheels, the summary and the table fit in the
#        call's 600 s beside it), then writes the summary and the table of what is done so
#        far. Run it again in the same lease to watch on (a side still running is not started
#        twice; one that finished starts again and skips what it did: both are resumable).
#        The set is copied once to gpu-runs/parity/NAME and the results accumulate there (not
#        in the carried .corpus, which each call's carry replaces with this machine's copy);
#        every call also leaves them in $OUT/NAME-runs.tgz.
#        OURS_ARGS: more `bench run` arguments for ours (e.g. --no-memory-check).
#        Then each side's summary and the agreement table.
# Carry: .whl (KernelBench's wheels, recipes/device_carry.sh wheels), .kb / .kb-triton and
# .corpus (prepared sets: docs/compat.md). Every long step prints a line at least every 15 s.
# The row (corpus): the agreement table's first lines.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
case "${1:-}" in
tests)
  exec bash benchmarks/recipes/gpu_tests.sh
  ;;
memcost)
  exec bash benchmarks/recipes/memory_check.sh cuda
  ;;
corpus)
  prepared=$2 kb=$3 seconds=${4:-420} backend=${5:-cuda}
  recipe_start
  set_dir=gpu-runs/parity/$(basename "$prepared")
  [ -d "$set_dir" ] || { mkdir -p gpu-runs/parity && cp -r "$prepared" "$set_dir"; }
  end=$(($(date +%s) + seconds)) life=$(($(date +%s) + ${LIFETIME:-1800}))
  wheels_install
  detached "$set_dir/kernelbench.pid" "$set_dir/kernelbench.log" \
    python3 -m benchmarks.compat kernelbench "$set_dir" --kb "$kb" --backend "$backend" \
    --deadline "$life" --jobs "${KB_JOBS:-8}" --tolerance 1e-2,1e-4 \
    --work-dir "/tmp/compat-kb-$backend"
  # shellcheck disable=SC2086
  detached "$set_dir/ours.pid" "$set_dir/ours_calls.log" \
    python3 -m benchmarks.compat ours "$set_dir" --deadline "$life" --backend cuda \
    --policy kernelbench --extra --jobs-per-gpu 3 ${OURS_ARGS:-}
  while { alive "$set_dir/kernelbench.pid" || alive "$set_dir/ours.pid"; } &&
    [ "$(date +%s)" -lt "$end" ]; do  # a line every 30 s
    sleep 30
    echo "$(date +%T) ours: $(tail -1 "$set_dir/ours.log" 2>/dev/null | cut -c1-150)"
    echo "$(date +%T) KernelBench: $(grep -c . "$set_dir/kernelbench.jsonl" 2>/dev/null) rows"
  done
  for side in kernelbench ours; do
    alive "$set_dir/$side.pid" && echo "$side still running (until $(date -d "@$life" +%T)):" \
      "the table below is of what is done so far; call again in this lease to watch on"
  done
  python3 -m benchmarks.compat summary "$set_dir" | cut -c1-700
  grep -h '^{' "$set_dir/kernelbench.log" | tail -1
  python3 -m benchmarks.compat table "$set_dir" --out "$OUT/table-$(basename "$set_dir").md" |
    head -60
  tar czf "$OUT/$(basename "$set_dir")-runs.tgz" -C "$(dirname "$set_dir")" \
    "$(basename "$set_dir")/ours" "$(basename "$set_dir")/kernelbench.jsonl" \
    "$(basename "$set_dir")/ours_segments.jsonl" 2>/dev/null
  row "reward parity, $(basename "$set_dir"):" \
    "$(grep '^| ' "$OUT/table-$(basename "$set_dir").md" 2>/dev/null | grep -v -e '---' |
      head -6 | joined)"
  ;;
*)
  echo "usage: $0 tests | memcost | corpus SET KB [SECONDS] [BACKEND]" >&2
  exit 2
  ;;
esac
