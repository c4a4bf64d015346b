#!/usr/bin/env bash
# Timing fidelity beside KernelBench's evaluator, and repeatability (docs/benchmarks.md): the
# self-speed-up of the 20 problems of benchmarks/problems_kb20.txt, ours and KernelBench's own
# evaluator (cuda_event timing), and the spread of repeated evaluations. One call each, carrying
# .kb (and .whl for the peer); on nvidia-h200-x2 run the peer with CUDA_VISIBLE_DEVICES=1 beside
# ours:
#   bash benchmarks/recipes/timing_fidelity.sh ours     ours over the 20
#                                                       (benchmarks/self_speedup.py)
#   bash benchmarks/recipes/timing_fidelity.sh peer     KernelBench's evaluator over the same
#                                                       (benchmarks/kernelbench_peer.py, the
#                                                       slow ones last)
#   bash benchmarks/recipes/timing_fidelity.sh repeat   5 runs each of
#                                                       benchmarks/problems_repeat6.txt
#   bash benchmarks/recipes/timing_fidelity.sh shared   the references of the first FID_N (30)
#                                                       technoabsurdist problems as solutions
#                                                       through `bench run --jobs-per-gpu`
#                                                       FID_JOBS (3)
#                                                       (verification shared, timing alone;
#                                                       carry .corpus, no .kb)
# The row: problems, correct, median and worst |1 - speed-up|, the repeat spread.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
[ "${1:-}" = shared ] || need_kb
recipe_start
case "${1:-}" in
shared)
  need .corpus/technoabsurdist "the technoabsurdist set, prepared as docs/compat.md says"
  python3 benchmarks/corpus_subset.py .corpus/technoabsurdist "${FID_N:-30}" /tmp/fid >/dev/null
  limit 150 python3 -m cuda_agent bench references --problems /tmp/fid/problems \
    --out /tmp/fid-refs >"$OUT/fid_refs.log" 2>&1
  rm -rf /tmp/fid/solutions && mkdir -p /tmp/fid/solutions
  for f in /tmp/fid/problems/level1/*.py; do
    n=$(basename "$f" .py)
    cp -r "/tmp/fid-refs/L1_$n"* /tmp/fid/solutions/ 2>/dev/null
  done
  CUDA_AGENT_CACHE=/tmp/ca-fid limit 400 python3 -m cuda_agent bench run \
    --problems /tmp/fid/problems --solutions /tmp/fid/solutions --backend cuda --policy off \
    --baselines eager --jobs-per-gpu "${FID_JOBS:-3}" --fresh --out /tmp/fid-run >"$OUT/fid_run.log" 2>&1
  echo "bench run ended with status $?"
  cp /tmp/fid-run/results.jsonl "$OUT/fid_results.jsonl" 2>/dev/null
  row "timing fidelity, --jobs-per-gpu ${FID_JOBS:-3}:" \
    "$(python3 benchmarks/speedup_deviation.py /tmp/fid-run/results.jsonl)"
  ;;
ours)
  limit 540 python3 benchmarks/self_speedup.py --kb .kb --repeat 5 --repeat-first 3 \
    --out "$OUT/self_ours.json" 2>"$OUT/self_ours.err" | tee "$OUT/self_ours.txt" | grep -v '^ '
  row "timing fidelity, ours:" "$(fields "$OUT/self_ours.json" problems correct median_abs_dev \
    worst_abs_dev repeat_spread_median median_wall_s)"
  ;;
peer)
  wheels_install
  grep -v '^#' benchmarks/problems_kb20.txt | grep -v -e 4_Matrix -e 47_Sum >/tmp/kb_list.txt
  grep -e 4_Matrix -e 47_Sum benchmarks/problems_kb20.txt >>/tmp/kb_list.txt
  limit 540 python3 benchmarks/kernelbench_peer.py self-speedup --kb .kb \
    --problem-file /tmp/kb_list.txt --out "$OUT/kb_self.json" 2>&1 | tee "$OUT/kb_self.txt" |
    tail -26
  row "timing fidelity, KernelBench:" "$(python3 benchmarks/speedup_deviation.py "$OUT/kb_self.json")"
  ;;
repeat)
  limit 540 python3 benchmarks/self_speedup.py --kb .kb --repeat 5 --repeat-first 6 \
    --problem-file benchmarks/problems_repeat6.txt --out "$OUT/self_repeat.json" \
    2>"$OUT/self_repeat.err" | tee "$OUT/self_repeat.txt" | grep -v '^ '
  row "repeatability:" \
    "$(fields "$OUT/self_repeat.json" problems repeat_spread_median repeat_spread)"
  ;;
*)
  echo "usage: $0 ours|peer|repeat" >&2
  exit 2
  ;;
esac
