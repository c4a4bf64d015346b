#!/usr/bin/env bash
# The KernelBench compatibility suite on an H200 pair, inside a deadline, resumable:
#   bash benchmarks/compat/gpu.sh DEADLINE_EPOCH SET [SET...]      (SET: h20, a100, l40, 3090)
# Each SET comes from .corpus/cuda-l1/SET.jsonl (CUDA-L1's released kernels; ignored, carried)
# and is prepared once into gpu-runs/compat/SET (problems named from the KernelBench checkout in
# .kb). GPU 0 runs ours (`cuda-agent bench run --policy kernelbench --baselines eager`) over the
# sets in turn; GPU 1 runs KernelBench's own evaluation of the same solutions (KB_JOBS at once,
# default 14), in parallel; both stop at the deadline and resume in the next call. Set
# COMPAT_KB=0 to run ours alone (the public-corpus figure on one GPU, no CPU shared with KernelBench's
# builds). KB_SITE: a folder of KernelBench's wheels (pydantic...) put first on its PYTHONPATH;
# KB_CHECKOUT: the KernelBench checkout (default .kb); COMPAT_BACKEND: ours' backend (cuda);
# COMPAT_POLICY: ours' policy (default kernelbench; another runs into SET/ours-POLICY);
# COMPAT_RUN: the run's folder name instead (a fresh run beside an older one: a timing of
# the whole set with today's code, e.g. COMPAT_KB=0 COMPAT_RUN=ours-2 ... h20);
# COMPAT_BENCH_ARGS: more `bench run` arguments for ours (e.g. "--jobs-per-gpu 2");
# COMPAT_OURS_GPUS: the GPUs ours uses (default "0"; "0 1" runs set i on GPU i mod 2, the sets
# side by side, beside KernelBench's evaluator on GPU 1).
# Ends with each set's summary of ours (wall time over all calls, verdict counts, solutions
# still without a verdict), KernelBench's counts, and the Markdown table
# (gpu-runs/compat/table-RUN.md).
set -u
deadline=$1
shift
root=gpu-runs/compat
policy=${COMPAT_POLICY:-kernelbench}
run=ours
[ "$policy" = kernelbench ] || run="ours-$policy"
run=${COMPAT_RUN:-$run}
mkdir -p "$root"
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
for set_name in "$@"; do
  [ -f "$root/$set_name/manifest.json" ] ||
    python3 -m benchmarks.compat prepare ".corpus/cuda-l1/$set_name.jsonl" --out "$root/$set_name" \
      --kb "${KB_CHECKOUT:-.kb}"
done
if [ "${COMPAT_KB:-1}" != 0 ]; then
  (
    export CUDA_VISIBLE_DEVICES=1 PYTHONPATH="${KB_SITE:+$KB_SITE:}$PYTHONPATH"
    for set_name in "$@"; do
      python3 -m benchmarks.compat kernelbench "$root/$set_name" --kb "${KB_CHECKOUT:-.kb}" \
        --deadline "$deadline" --jobs "${KB_JOBS:-14}" >>"$root/$set_name/kernelbench.log" 2>&1
    done
  ) &
fi
ours_on() {  # ours over the given sets in turn, on GPU $1
  local gpu=$1
  shift
  for set_name in "$@"; do
    CUDA_VISIBLE_DEVICES=$gpu python3 -m benchmarks.compat ours "$root/$set_name" \
      --deadline "$deadline" --backend "${COMPAT_BACKEND:-cuda}" --policy "$policy" \
      --run "$run" ${COMPAT_BENCH_ARGS:+--extra $COMPAT_BENCH_ARGS} \
      >>"$root/$set_name/${run}_calls.log" 2>&1
  done
}
read -r -a ours_gpus <<<"${COMPAT_OURS_GPUS:-0}"
if [ "${#ours_gpus[@]}" -le 1 ]; then
  ours_on "${ours_gpus[0]:-0}" "$@"
else  # set i on GPU i mod n, the GPUs side by side
  i=0
  for set_name in "$@"; do
    ours_on "${ours_gpus[$((i % ${#ours_gpus[@]}))]}" "$set_name" &
    i=$((i + 1))
  done
fi
wait
for set_name in "$@"; do
  python3 -m benchmarks.compat summary "$root/$set_name" --run "$run"
  grep -h '^{' "$root/$set_name/kernelbench.log" 2>/dev/null | tail -1
done
python3 -m benchmarks.compat table "${@/#/$root/}" --run "$run" --out "$root/table-$run.md" |
  head -30
