#!/usr/bin/env bash
# Export: the installed package against the evaluated runtime (docs/benchmarks.md, and
# docs/export.md): a verified kernel evaluated with --shapes, exported (`cuda-agent export`),
# pip-installed into a fresh virtual environment and run there eagerly and under
# torch.compile, timed back to back (benchmarks/export_h200.py). One call on nvidia-h200:
#   bash benchmarks/recipes/export.sh
# EXPORT_EXAMPLES ("relu"; "relu bias_gelu_scale" for the workdir too, within the call's time).
# The row: the package's times against the evaluated runtime.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
for example in ${EXPORT_EXAMPLES:-relu}; do
  CUDA_VISIBLE_DEVICES=0 limit 540 python3 benchmarks/export_h200.py --example "$example" \
    --work "/tmp/export-$example" --out "$OUT/export_$example.json" \
    2>"$OUT/export_$example.log" | tee "$OUT/export_$example.txt"
done
row "export:" "$(for example in ${EXPORT_EXAMPLES:-relu}; do
  echo "$example"; grep -E "^\|" "$OUT/export_$example.txt" | grep -v -e "---" | tail -n +2
done | joined)"
