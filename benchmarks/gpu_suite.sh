#!/usr/bin/env bash
# The H200 run behind docs/benchmarks.md, in parts that each fit a 10-minute call:
#   bash benchmarks/gpu_suite.sh A   GPU tests, evaluation latency, stream exploit, timing fidelity
#   bash benchmarks/gpu_suite.sh B   the peer: KernelBench's evaluator on the same measurements
#   bash benchmarks/gpu_suite.sh C   build times (benchmarks/build_cache.py, cuda backend)
#   bash benchmarks/gpu_suite.sh D   dataset synthesis: 1,000 programmatic candidates (every GPU)
#   bash benchmarks/gpu_suite.sh E   the replayed agent demo on the cuda backend
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
  timeout 260 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider -rfE -s >"$OUT/gpu_tests.log" 2>&1
  grep -E "passed|failed|FAILED|ERROR|ncu:" "$OUT/gpu_tests.log" | tail -15
  timeout 80 python3 benchmarks/eval_latency.py --backend cuda --runs 3 | tee "$OUT/eval_latency.txt"
  timeout 60 python3 benchmarks/stream_exploit.py --kb .kb | tee "$OUT/stream_ours.txt"
  timeout 170 python3 benchmarks/self_speedup.py --kb .kb --repeat 5 --repeat-first 3 \
    --out "$OUT/self_ours.json" | tail -30
  ;;
B)
  kb_env
  grep -v '^#' benchmarks/problems_kb20.txt | grep -v -e 4_Matrix -e 47_Sum >/tmp/kb_list.txt
  grep -e 4_Matrix -e 47_Sum benchmarks/problems_kb20.txt >>/tmp/kb_list.txt
  timeout 250 python3 benchmarks/kernelbench_peer.py self-speedup --kb .kb \
    --problem-file /tmp/kb_list.txt --out "$OUT/kb_self.json" | tail -26
  timeout 120 python3 benchmarks/kernelbench_peer.py stream --kb .kb --stream-timing cuda_event \
    --out "$OUT/kb_stream.json" | tail -8
  timeout 180 python3 benchmarks/kernelbench_peer.py build --kb .kb --out "$OUT/kb_build.json" \
    | tail -8
  ;;
C)
  timeout 100 python3 benchmarks/build_cache.py --backend cuda --skip-peer | tee "$OUT/build_cache.txt"
  ;;
D)
  nvidia-smi -L
  timeout "${SYNTH_TIMEOUT:-480}" python3 -m cuda_agent synth --n "${SYNTH_N:-1000}" \
    --backend cuda --decontaminate-against .kb --worker-slots "${SYNTH_SLOTS:-6}" \
    --batch-size 16 --out "$OUT/synth" >"$OUT/synth.log" 2>&1
  echo "synth exit $?"
  python3 -m cuda_agent synth --out "$OUT/synth" --export-only 2>&1 | tail -25
  tar czf "$OUT/synth.tgz" -C "$OUT" synth && rm -rf "$OUT/synth"  # one file comes back
  ;;
E)
  timeout 240 python3 -m cuda_agent demo --backend cuda --out "$OUT/demo" 2>&1 | tee "$OUT/demo.txt"
  tar czf "$OUT/demo.tgz" -C "$OUT" demo && rm -rf "$OUT/demo"
  ;;
*)
  echo "usage: $0 A|B|C|D|E" >&2
  exit 2
  ;;
esac
