#!/usr/bin/env bash
# Build times (docs/benchmarks.md, "Build times, cuda backend" and "cpu backend"): a candidate's
# extension built cold, cached and after an edit of one source (benchmarks/build_cache.py,
# a fresh cache per row), against stock `load_inline` on the same source. One call:
#   bash benchmarks/recipes/build_times.sh cuda    on the device (nvidia-h200)
#   bash benchmarks/recipes/build_times.sh cpu     runnable anywhere (the cpu backend)
#   bash benchmarks/recipes/build_times.sh peer    KernelBench's own build of the same
#                                                  candidates (carry .kb and .whl)
# The row: each build's wall seconds and units compiled.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
case "${1:-cuda}" in
cuda|cpu)
  limit 540 python3 benchmarks/build_cache.py --backend "${1:-cuda}" \
    2>"$OUT/build_times-${1:-cuda}.err" | tee "$OUT/build_times-${1:-cuda}.txt"
  row "build times, ${1:-cuda} backend (build / wall s / cpu s / compiled):" \
    "$(sed -n '/^build .*wall s/,$p' "$OUT/build_times-${1:-cuda}.txt" | tail -n +2 | joined)"
  ;;
peer)
  need_kb
  wheels_install
  limit 540 python3 benchmarks/kernelbench_peer.py build --kb .kb --out "$OUT/kb_build.json" |
    tee "$OUT/kb_build.txt" | tail -8
  row "KernelBench's build:" \
    "$(grep -iE "cold|cached|[0-9] s" "$OUT/kb_build.txt" | tail -4 | joined)"
  ;;
*)
  echo "usage: $0 cuda|cpu|peer" >&2
  exit 2
  ;;
esac
