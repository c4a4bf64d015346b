#!/usr/bin/env bash
# CUDA under each confinement step (docs/benchmarks.md; docs/security.md, "On the H200"):
# whether a GPU worker can start CUDA (`cuInit`) under each isolation step, and the isolation
# this machine offers GPU workers. One call each on nvidia-h200:
#   bash benchmarks/recipes/confinement.sh probe    benchmarks/confine_gpu_probe.py, the
#                                                   machine's isolation summary
#   bash benchmarks/recipes/confinement.sh tests    the isolation tests on this machine
#                                                   (test_confine, test_isolation,
#                                                   test_spare_workers)
# The row: `cuInit`'s result under each plan, and the GPU workers' isolation; or the tests'
# summary line.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
case "${1:-}" in
probe)
  echo "uid $(id -u); bwrap: $(command -v bwrap || echo absent)"
  python3 -c "from cuda_agent.workspace.isolation import machine_summary as m; print(m())" |
    tee "$OUT/isolation.txt"
  python3 -c "from cuda_agent.workspace.sandbox import worker_isolation as w
print('gpu worker isolation:', w(True))" | tee -a "$OUT/isolation.txt"
  limit 300 python3 benchmarks/confine_gpu_probe.py 2>&1 | tee "$OUT/confine_probe.txt"
  row "CUDA under confinement:" \
    "$(grep -E " rc -?[0-9]+: |^gpu worker" "$OUT/confine_probe.txt" \
    "$OUT/isolation.txt" | cut -d: -f2- | joined)"
  ;;
tests)
  limit 540 python3 -m pytest -q -p no:cacheprovider -rfEs tests/workspace/test_confine.py \
    tests/adversarial/test_isolation.py tests/evaluator/launch/test_spare_workers.py \
    >"$OUT/iso_tests.log" 2>&1
  echo "isolation tests exit $?"
  grep -E "passed|failed|skipped|SKIPPED|FAILED|ERROR" "$OUT/iso_tests.log" | tail -20
  row "isolation tests:" "$(grep -E "passed|failed" "$OUT/iso_tests.log" | tail -1)"
  ;;
*)
  echo "usage: $0 probe|tests" >&2
  exit 2
  ;;
esac
