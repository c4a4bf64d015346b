#!/usr/bin/env bash
# The H200 run behind docs/benchmarks.md, in three parts that each fit a 10-minute call:
#   bash benchmarks/gpu_suite.sh A   GPU tests, build times, evaluation latency, stream exploit
#   bash benchmarks/gpu_suite.sh B   timing fidelity: ours, then KernelBench's evaluator
#   bash benchmarks/gpu_suite.sh C   KernelBench's build and stream figures (the peer)
# Needs a KernelBench checkout in .kb/ and, for KernelBench's evaluator, wheels in .whl/
# (pydantic and friends; see benchmarks/kernelbench_peer.py). Logs go to $OUT (or ./gpu-results).
set -u
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src:$PWD" PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=/tmp/ca-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
kb_env() {
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    >/dev/null 2>&1
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
}
case "${1:-}" in
A)
  nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  timeout 320 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider -rA 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -25
  timeout 100 python3 benchmarks/build_cache.py --backend cuda --skip-peer | tee "$OUT/build_cache.txt"
  timeout 90 python3 benchmarks/eval_latency.py --backend cuda --runs 3 | tee "$OUT/eval_latency.txt"
  timeout 70 python3 benchmarks/stream_exploit.py --kb .kb | tee "$OUT/stream_ours.txt"
  ;;
B)
  timeout 300 python3 benchmarks/self_speedup.py --kb .kb --repeat 5 --repeat-first 3 \
    --out "$OUT/self_ours.json" | tail -28
  grep -v '^#' benchmarks/problems_kb20.txt | grep -v -e 4_Matrix -e 47_Sum >/tmp/kb_list.txt
  grep -e 4_Matrix -e 47_Sum benchmarks/problems_kb20.txt >>/tmp/kb_list.txt
  kb_env
  timeout 250 python3 benchmarks/kernelbench_peer.py self-speedup --kb .kb \
    --problem-file /tmp/kb_list.txt --out "$OUT/kb_self.json" | tail -26
  ;;
C)
  kb_env
  timeout 280 python3 benchmarks/kernelbench_peer.py build --kb .kb --out "$OUT/kb_build.json"
  timeout 200 python3 benchmarks/kernelbench_peer.py stream --kb .kb --stream-timing cuda_event \
    --out "$OUT/kb_stream.json"
  ;;
*)
  echo "usage: $0 A|B|C" >&2
  exit 2
  ;;
esac
