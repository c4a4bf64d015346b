#!/usr/bin/env bash
# GPU tests (docs/benchmarks.md): the GPU test suite (`pytest -m gpu tests/gpu`) on a real GPU,
# what CI cannot run (memory check, KernelBench semantics, the stream check, Triton under both
# policies, the profile stage, GRPO on cuda with TRL). One call on nvidia-h200, carrying .whl
# (TRL, datasets: recipes/device_carry.sh wheels):
#   bash benchmarks/recipes/gpu_tests.sh
# TESTS_ARGS: more pytest arguments (e.g. -k "another_stream or cudnn"); TESTS_SECONDS (540) for
# the parallel run, SHARED_SECONDS (240) for tests/gpu/test_shared_gpu.py, run alone after it.
# The row: pytest's summary line.
set -u
# shellcheck source=benchmarks/recipes/common.sh
. "$(dirname "$0")/common.sh"
recipe_start
command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
wheels_install
# TESTS_ARGS is read as shell words, quotes kept (`-k "discarded or scratch"` is one -k)
eval "extra=(${TESTS_ARGS:-})"
# the shared-GPU tests hold the device's memory or time from another process: alone, after
limit "${TESTS_SECONDS:-540}" python3 -m pytest -m gpu tests/gpu -n 4 -v -p no:cacheprovider \
  --ignore tests/gpu/test_shared_gpu.py -rfEx "${extra[@]}" >"$OUT/gpu-tests.log" 2>&1
echo "pytest exit $?"
limit "${SHARED_SECONDS:-240}" python3 -m pytest -m gpu tests/gpu/test_shared_gpu.py -v \
  -p no:cacheprovider -rfEx "${extra[@]}" >>"$OUT/gpu-tests.log" 2>&1
echo "pytest (shared GPU) exit $?"
grep -E "PASSED|FAILED|ERROR|XFAIL|ncu:" "$OUT/gpu-tests.log" | tail -60
row "GPU tests (parallel; shared GPU):" \
  "$(grep -E "^=+ .*(passed|failed|error).* =+$" "$OUT/gpu-tests.log" | tail -2 | tr '\n' ' ')"
