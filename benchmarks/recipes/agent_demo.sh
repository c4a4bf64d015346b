#!/usr/bin/env bash
# The replayed agent demo on the cuda backend (docs/agent.md, "On the H200"): `cuda-agent demo`
# end to end on a GPU. One call on nvidia-h200:
#   bash benchmarks/recipes/agent_demo.sh
# The demo's folder comes back as $OUT/demo.tgz.
# The row: the demo's last lines (its outcome).
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
limit 540 python3 -m cuda_agent demo --backend cuda --out "$OUT/demo" 2>&1 | tee "$OUT/demo.txt"
tar czf "$OUT/demo.tgz" -C "$OUT" demo && rm -rf "$OUT/demo"
row "agent demo:" "$(grep -v '^\s*$' "$OUT/demo.txt" | tail -3 | joined)"
