#!/usr/bin/env bash
# Worker start-up and verdict throughput (docs/benchmarks.md). One call each:
#   bash benchmarks/recipes/worker_start.sh start        a fresh worker's start, request to
#                                                        "ready", forked from the template and as
#                                                        its own process (`confine` isolation;
#                                                        benchmarks/worker_start.py); BACKEND=cpu
#                                                        runs it anywhere (the dev-box rows)
#   bash benchmarks/recipes/worker_start.sh throughput   SOLUTIONS (20) technoabsurdist solutions
#                                                        through `bench run`, cold, with today's
#                                                        defaults and with the template and the
#                                                        compile slots off (carry .corpus: the set
#                                                        prepared as docs/compat.md says)
# The row: the start's median each way; or verdicts, wall and verdicts per hour each way
# (benchmarks/bench_pair.py, from run.json's utilization).
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
case "${1:-}" in
start)
  backend=${BACKEND:-cuda}
  limit 400 python3 benchmarks/worker_start.py --backend "$backend" --runs 5 --isolation confine \
    2>"$OUT/worker_start.err" | tee "$OUT/worker_start.txt"
  row "worker start, $backend (way / first / min / median / max s):" \
    "$(sed -n '/^way /,$p' "$OUT/worker_start.txt" | tail -n +2 | joined)"
  ;;
throughput)
  need .corpus/technoabsurdist "the technoabsurdist set, prepared as docs/compat.md says"
  python3 benchmarks/corpus_subset.py .corpus/technoabsurdist "${SOLUTIONS:-20}" /tmp/ta >/dev/null
  for way in new old; do
    if [ $way = new ]; then extra=(); else
      extra=(CUDA_AGENT_WORKER_TEMPLATE=0 CUDA_AGENT_COMPILE_JOBS=1000); fi
    env "${extra[@]}" CUDA_AGENT_CACHE=/tmp/ca-$way timeout "$(left 260)" python3 -m cuda_agent \
      bench run --problems /tmp/ta/problems --solutions /tmp/ta/solutions --backend cuda \
      --out /tmp/ta-$way >"$OUT/bench-$way.log" 2>&1
    echo "bench $way exit $?"
  done
  python3 benchmarks/bench_pair.py /tmp/ta-new /tmp/ta-old | tee "$OUT/bench-pair.txt"
  row "verdict throughput (run / verdicts / correct / wall s / per hour / held / work / wait s):" \
    "$(sed -n '/^run /,$p' "$OUT/bench-pair.txt" | sed -n 2,3p | joined)"
  ;;
*)
  echo "usage: $0 start|throughput" >&2
  exit 2
  ;;
esac
