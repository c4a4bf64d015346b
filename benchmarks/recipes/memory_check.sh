#!/usr/bin/env bash
# The memory check (docs/benchmarks.md): what running a correct candidate once more under the
# memory checker costs, on the bundled examples (benchmarks/memory_check_cost.py). One call:
#   bash benchmarks/recipes/memory_check.sh cuda    on the device (nvidia-h200), standard sizes
#   bash benchmarks/recipes/memory_check.sh cpu     runnable anywhere (AddressSanitizer, small
#                                                   sizes)
# The row: each example's verdict, worker seconds and memory-check seconds.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
case "${1:-cuda}" in
cuda) args=(--backend cuda) ;;
cpu) args=(--backend cpu --size small) ;;
*)
  echo "usage: $0 cuda|cpu" >&2
  exit 2
  ;;
esac
recipe_start
limit 540 python3 benchmarks/memory_check_cost.py "${args[@]}" --out "$OUT/memcost.jsonl" \
  2>"$OUT/memcost.err" | tee "$OUT/memcost.txt" | grep -v '^{'
row "memory check (problem / verdict / worker s / check s / found):" \
  "$(grep '^| ' "$OUT/memcost.txt" | grep -v -e '---' -e '| problem' | joined)"
