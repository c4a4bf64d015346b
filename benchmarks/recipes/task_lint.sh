#!/usr/bin/env bash
# Task lint of KernelBench levels 1-3 (docs/benchmarks.md; the findings in docs/security.md):
# `cuda-agent problems lint` over all 250 problems, resumable: the results accumulate in
# gpu-runs/kb_lint.json and a later call goes on where the last stopped. Carry .kb (and
# gpu-runs between calls); repeat until the row counts 250 linted (about two calls):
#   bash benchmarks/recipes/task_lint.sh
# LINT_SLOTS (6) worker slots per GPU. Every call leaves the lint's JSON in $OUT.
# The row: problems linted / flagged / failing to run.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
need_kb
recipe_start
mkdir -p gpu-runs
limit 560 python3 -m cuda_agent problems lint --set .kb --levels 1,2,3 --backend cuda \
  --worker-slots "${LINT_SLOTS:-6}" --timeout 200 --out gpu-runs/kb_lint.json --resume \
  >"$OUT/kb_lint.txt" 2>&1
echo "lint exit $?"
tail -60 "$OUT/kb_lint.txt"
cp gpu-runs/kb_lint.json "$OUT/" 2>/dev/null
row "task lint:" "$(python3 - gpu-runs/kb_lint.json <<'PY'
import json, sys
try:
    data = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no lint results: {e}")
rows = [r for r in data.values() if isinstance(r, dict)]  # problem id -> ok, lint, error
flagged = sum(1 for r in rows if r.get("lint"))
failed = sum(1 for r in rows if not r.get("ok"))
print(f"linted {len(rows)} flagged {flagged} failing to run {failed}")
PY
)"
