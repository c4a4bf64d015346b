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
#   bash benchmarks/recipes/reward_service.sh corpus       on nvidia-h200: the first SVC_N (60)
#                                                          solutions of SVC_SET (default the
#                                                          technoabsurdist set; SVC_INTERLEAVE=1:
#                                                          its levels in turn) split among
#                                                          SVC_CLIENTS (3) `bench run --service`
#                                                          clients of one `serve --http
#                                                          --jobs-per-gpu 3`, SIGKILLed
#                                                          SVC_KILL_AFTER (90) s in and started
#                                                          again on the same store (carry
#                                                          .corpus .whl)
# The row: the load test's summary; or verdicts, wall and verdicts per hour each way; or the
# corpus's verdicts, wall, per hour, latency percentiles and the jobs the restart re-queued.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
case "${1:-}" in
load)
  wheels_install
  export LOAD_SUBMISSIONS=1000 # CI runs the same test with 250
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
corpus)
  set_dir=${SVC_SET:-.corpus/technoabsurdist}
  need "$set_dir" "the prepared set, as docs/compat.md says"
  wheels_install
  clients=${SVC_CLIENTS:-3}
  order=()
  [ "${SVC_INTERLEAVE:-0}" = 1 ] && order=(--interleave)
  python3 benchmarks/corpus_subset.py "$set_dir" "${SVC_N:-60}" /tmp/svc-set "${order[@]}" \
    >/dev/null
  rm -rf /tmp/svc-client-* /tmp/svc-out-* /tmp/svc.db* /tmp/ca-svc
  i=0
  for f in /tmp/svc-set/solutions/*.py; do
    c=/tmp/svc-client-$((i % clients))
    ident=$(basename "$f" .py)
    level=${ident%%_*}
    rest=${ident#*_}
    mkdir -p "$c/solutions" "$c/problems/level${level#L}"
    cp "$f" "$c/solutions/"
    cp "/tmp/svc-set/problems/level${level#L}/$rest.py" "$c/problems/level${level#L}/"
    i=$((i + 1))
  done
  serve() {
    CUDA_AGENT_CACHE=/tmp/ca-svc python3 -m cuda_agent serve --http 127.0.0.1:8765 \
      --backend "${SVC_BACKEND:-cuda}" --jobs-per-gpu 3 --db /tmp/svc.db >>"$OUT/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 240); do
      curl -sf http://127.0.0.1:8765/v1/health >/dev/null && return 0
      sleep 0.5
    done
    echo "the service did not answer its health check"
  }
  RECIPE_CLEANUP='kill "$server" 2>/dev/null'
  began=$(date +%s)
  serve
  echo "[$(date +%T)] service up after $(($(date +%s) - began)) s; $clients clients"
  pids=()
  for c in $(seq 0 $((clients - 1))); do
    CUDA_AGENT_CACHE=/tmp/ca-svc-client limit 520 python3 -m cuda_agent bench run \
      --problems "/tmp/svc-client-$c/problems" --solutions "/tmp/svc-client-$c/solutions" \
      --backend "${SVC_BACKEND:-cuda}" --policy kernelbench --service http://127.0.0.1:8765 \
      --out "/tmp/svc-out-$c" >"$OUT/client-$c.log" 2>&1 &
    pids+=($!)
  done
  sleep "${SVC_KILL_AFTER:-90}"
  echo "[$(date +%T)] SIGKILL to the service (pid $server)"
  kill -9 "$server"
  serve
  echo "[$(date +%T)] service up again"
  for p in "${pids[@]}"; do wait "$p"; echo "client ended with status $?"; done
  wall=$(($(date +%s) - began))
  cat /tmp/svc-out-*/results.jsonl >"$OUT/results-service.jsonl" 2>/dev/null
  python3 - "$OUT/results-service.jsonl" /tmp/svc.db "$wall" "${SVC_N:-60}" \
    <<'PY' | tee "$OUT/service_corpus.txt"
import json, sqlite3, statistics, sys
rows = [json.loads(x) for x in open(sys.argv[1]) if x.strip()]
wall, asked = float(sys.argv[3]), int(sys.argv[4])
db = sqlite3.connect(sys.argv[2])
jobs = db.execute("SELECT state, attempts, created, started, finished FROM jobs").fetchall()
lat = sorted(f - c for s, a, c, st, f in jobs if f is not None)
q = statistics.quantiles(lat, n=100) if len(lat) > 1 else lat * 99
states = {}
for s, *_ in jobs:
    states[s] = states.get(s, 0) + 1
print(json.dumps({
    "asked": asked, "verdicts": len(rows), "correct": sum(bool(r["result"].get("correct")) for r in rows),
    "wall_s": wall, "per_hour": round(3600 * len(rows) / wall), "jobs": len(jobs), "states": states,
    "requeued": sum(1 for j in jobs if j[1] > 1),
    "latency_s": {"p50": round(q[49], 1), "p90": round(q[89], 1), "p99": round(q[98], 1), "max": round(lat[-1], 1)} if lat else {},
}))
PY
  row "service on the corpus:" "$(tail -1 "$OUT/service_corpus.txt")"
  ;;
*)
  echo "usage: $0 load|throughput|corpus" >&2
  exit 2
  ;;
esac
