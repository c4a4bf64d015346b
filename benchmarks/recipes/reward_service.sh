#!/usr/bin/env bash
# The reward service under load (docs/benchmarks.md; docs/service.md). One call each:
#   bash benchmarks/recipes/reward_service.sh load         runnable anywhere: 1,000 submissions
#                                                          from 32 clients, the service killed
#                                                          and restarted midway
#                                                          (tests/service/test_service_load.py;
#                                                          on the device carry .whl)
#   bash benchmarks/recipes/reward_service.sh throughput   on nvidia-h200: REFS (30)
#                                                          technoabsurdist references through
#                                                          `bench run` directly and through
#                                                          `serve --http` (carry .corpus .whl)
# The row: the load test's summary; or verdicts, wall and verdicts per hour each way.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
case "${1:-}" in
load)
  wheels_install
  limit 560 python3 -m pytest -s -p no:cacheprovider tests/service/test_service_load.py \
    >"$OUT/service_load.log" 2>&1
  echo "load test exit $?"
  tail -20 "$OUT/service_load.log"
  row "reward service under load:" "$(grep -iE "submitted|acknowledged|lost|passed|failed" \
    "$OUT/service_load.log" | tail -2 | joined)"
  ;;
throughput)
  need .corpus/technoabsurdist "the technoabsurdist set, prepared as docs/compat.md says"
  wheels_install
  limit 120 python3 -m cuda_agent bench references --problems .corpus/technoabsurdist/problems \
    --out /tmp/refs >/dev/null 2>&1
  python3 benchmarks/corpus_subset.py .corpus/technoabsurdist "${REFS:-30}" /tmp/rs >/dev/null
  rm -rf /tmp/rs/solutions && mkdir -p /tmp/rs/solutions
  for f in /tmp/rs/problems/level1/*.py; do
    n=$(basename "$f" .py)
    cp "/tmp/refs/L1_$n.py" /tmp/rs/solutions/ 2>/dev/null ||
      cp -r "/tmp/refs/L1_$n" /tmp/rs/solutions/
  done
  CUDA_AGENT_CACHE=/tmp/ca-direct limit 240 python3 -m cuda_agent bench run \
    --problems /tmp/rs/problems --solutions /tmp/rs/solutions --backend cuda --policy off \
    --baselines eager --out /tmp/rs-direct >"$OUT/direct.log" 2>&1
  CUDA_AGENT_CACHE=/tmp/ca-svc python3 -m cuda_agent serve --http 127.0.0.1:8765 --backend cuda \
    --db /tmp/svc.db >"$OUT/serve.log" 2>&1 &
  RECIPE_CLEANUP="kill $! 2>/dev/null"
  for _ in $(seq 120); do
    curl -sf http://127.0.0.1:8765/v1/health >/dev/null && break
    sleep 0.5
  done
  CUDA_AGENT_CACHE=/tmp/ca-svc-client limit 240 python3 -m cuda_agent bench run \
    --problems /tmp/rs/problems --solutions /tmp/rs/solutions --backend cuda --policy off \
    --baselines eager --service http://127.0.0.1:8765 --out /tmp/rs-service >"$OUT/service.log" 2>&1
  python3 benchmarks/bench_pair.py /tmp/rs-direct /tmp/rs-service | tee "$OUT/pair.txt"
  row "through the service (run / verdicts / correct / wall s / per hour / held / work / wait s):" \
    "$(sed -n '/^run /,$p' "$OUT/pair.txt" | sed -n 2,3p | joined)"
  ;;
*)
  echo "usage: $0 load|throughput" >&2
  exit 2
  ;;
esac
