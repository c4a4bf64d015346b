#!/usr/bin/env bash
# Dataset synthesis (docs/benchmarks.md): `cuda-agent synth` over SYNTH_N (1000) programmatic
# candidates on every GPU, six worker slots per GPU, decontaminated against KernelBench; then
# the similarity to KernelBench recomputed without a GPU (benchmarks/synth_static.py). One call
# on nvidia-h200 (or nvidia-h200-x2, as the docs' row), carrying .kb:
#   bash benchmarks/recipes/dataset_synthesis.sh
# SYNTH_N, SYNTH_SLOTS (6); SYNTH_RAY=1 runs it through RayPool (`--ray local`; carry
# .raybundle). The dataset comes back as $OUT/synth.tgz.
# The row: accepted of candidates, the wall time, the rejections and the similarity.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
need_kb
recipe_start
extra=()
if [ "${SYNTH_RAY:-0}" = 1 ]; then
  bundle=$(ls .raybundle/ray-*-cp312.tar.xz 2>/dev/null | tail -1)
  need "${bundle:-.raybundle/ray-VERSION-cp312.tar.xz}" "python3 benchmarks/ray_bundle.py build"
  python3 benchmarks/ray_bundle.py unpack "$bundle" --target /tmp/ray-site
  export PYTHONPATH="/tmp/ray-site:$PYTHONPATH" RAY_USAGE_STATS_ENABLED=0 \
    RAY_memory_monitor_refresh_ms=0
  extra=(--ray local)
fi
start=$(date +%s)
limit 470 python3 -m cuda_agent synth --n "${SYNTH_N:-1000}" --backend cuda \
  --decontaminate-against .kb --worker-slots "${SYNTH_SLOTS:-6}" --batch-size 16 "${extra[@]}" \
  --out "$OUT/synth" >"$OUT/synth.log" 2>&1
echo "synth exit $? after $(($(date +%s) - start)) s"
python3 -m cuda_agent synth --out "$OUT/synth" --export-only 2>&1 | tee "$OUT/synth-export.txt" |
  tail -25
wall=$(($(date +%s) - start))
limit 60 python3 benchmarks/synth_static.py --n "${SYNTH_N:-1000}" --against .kb \
  >"$OUT/synth-static.txt" 2>&1
tar czf "$OUT/synth.tgz" -C "$OUT" synth && rm -rf "$OUT/synth"
row "dataset synthesis, ${SYNTH_N:-1000} candidates in about $wall s:" \
  "$(grep -iE "accepted|rejected|per minute" "$OUT/synth-export.txt" | head -4 | joined) ;" \
  "$(grep -iE "similar|median|max" "$OUT/synth-static.txt" | tail -2 | joined)"
