# The set-up every recipe in benchmarks/recipes/ shares; each recipe sources it first
# (`. "$(dirname "$0")/common.sh"`), it is never run on its own. Sourcing it:
#   - moves to the repository root;
#   - sets OUT (the device tool's folder that comes back; ./gpu-results elsewhere), the
#     PYTHONPATH (src, the repository, /tmp/site where the carried wheels go), a build cache
#     in /tmp, unbuffered Python, offline Hugging Face, NVLink multicast off (two-GPU kinds);
#   - (recipes call the cuda-agent CLI as `python3 -m cuda_agent`: the device machine does
#     not install the package, and `timeout` runs programs, not shell functions);
#   - sets RECIPE_END, the time by which a recipe must have finished: RECIPE_SECONDS (570)
#     from now, inside one 10-minute device call.
# It defines:
#   recipe_start         the GPUs named, $OUT made, the heartbeat started (a device recipe's
#                        first line; a recipe runnable anywhere calls it too: it needs no GPU)
#   heartbeat_start      a line every 15 s naming what holds the GPU, ended with the script
#                        (with RECIPE_CLEANUP, commands a recipe wants run at its exit)
#   row TEXT...          the recipe's table row, printed last (the heartbeat stopped first)
#   left CAP             seconds until RECIPE_END, at most CAP, at least 5
#   limit CAP CMD...     CMD under `timeout`, at most CAP seconds and never past RECIPE_END
#   need PATH HOW        stop (exit 2) where a carried folder or file is missing, saying HOW
#                        to make it
#   need_kb              stop (exit 2) where the KernelBench checkout .kb is not carried
#   detached PIDFILE LOG CMD...  CMD in a session of its own (setsid), its output appended to
#                        LOG, its pid and start time in PIDFILE: it outlives the recipe and
#                        the device call (the machine keeps it until it goes back), so a long
#                        run is not cut at a call's end; where PIDFILE's process still runs,
#                        nothing new starts (a later call of the same lease watches it)
#   alive PIDFILE        whether PIDFILE's process still runs (the same process: a pid reused
#                        by another one, or a zombie, is not it)
#   wheels_install       the carried .whl/*.whl into /tmp/site, once per machine
#   wheels_download      (here) .whl/: the packages the device image lacks, at the locks'
#                        versions, as cp312 x86-64 wheels
#   chunks_prepare DIR FILE...   (here) the files as one tar cut into 58 MB DIR/chunk-NN
#                        files (one call carries at most 64 MiB) and DIR/MANIFEST (each
#                        file's SHA-256, the number of chunks)
#   chunks_receive DIR STORE     (there) keep the carried DIR/chunk-* in STORE (/tmp lasts
#                        while the machine stays warm), say how many of how many are there
#   chunks_install STORE         (there) once all are there: join them, check every SHA-256,
#                        pip install the wheels --no-deps into /tmp/site
#   quiet                drops progress bars, warnings and INFO log lines from a stream
#   joined               a stream's lines as one line, spaces squeezed, joined by " ; "
#   fields FILE KEY...   KEY=value of each KEY of a JSON file's top-level object
# shellcheck shell=bash
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-gpu-results}
export OUT
export PYTHONPATH="$PWD/src:$PWD:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 CUDA_AGENT_CACHE=${CUDA_AGENT_CACHE:-/tmp/ca-cache}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
RECIPE_END=$(($(date +%s) + ${RECIPE_SECONDS:-570}))
CHUNK_BYTES=58000000
HEARTBEAT_PID=

recipe_start() {
  mkdir -p "$OUT"
  nvidia-smi -L 2>/dev/null || echo "no GPU here (nvidia-smi absent)"
  heartbeat_start
}

heartbeat_start() {
  [ -n "$HEARTBEAT_PID" ] && return 0
  (
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    while :; do
      sleep 15 &
      sleeper=$!
      wait "$sleeper"
      held=$(nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader \
        2>/dev/null | tr '\n' ';')
      echo "[$(date +%T)] gpu held by: ${held:-nothing}"
    done
  ) &
  HEARTBEAT_PID=$!
  trap 'heartbeat_stop; eval "${RECIPE_CLEANUP:-}"' EXIT
}

heartbeat_stop() {
  [ -n "$HEARTBEAT_PID" ] && kill "$HEARTBEAT_PID" 2>/dev/null
  HEARTBEAT_PID=
  return 0
}

row() {
  heartbeat_stop
  echo "row: $*"
}

left() {
  local l=$((RECIPE_END - $(date +%s)))
  echo $((l < $1 ? (l > 5 ? l : 5) : $1))
}

limit() {
  local cap=$1
  shift
  timeout "$(left "$cap")" "$@"
}

need() {
  [ -e "$1" ] && return 0
  echo "missing $1: $2" >&2
  exit 2
}

need_kb() { need .kb "a KernelBench checkout (docs/compat.md)"; }

# a process's state and start time (fields 3 and 22 of /proc/PID/stat, read after the name)
proc_state() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1,20; }

alive() {
  local pid start state
  read -r pid start 2>/dev/null <"$1" || return 1
  state=$(proc_state "$pid") || return 1
  [ -n "$state" ] && [ "${state#* }" = "$start" ] && [ "${state%% *}" != Z ]
}

detached() {
  local pidfile=$1 log=$2 pid
  shift 2
  if alive "$pidfile"; then
    echo "still running from an earlier call: pid $(cut -d' ' -f1 "$pidfile") ($1 $2 $3 ...)"
    return 0
  fi
  setsid "$@" >>"$log" 2>&1 </dev/null &
  pid=$!
  echo "$pid $(proc_state "$pid" | cut -d' ' -f2)" >"$pidfile"
}

wheels_install() {
  [ -f /tmp/site/.recipes-installed ] && return 0
  ls .whl/*.whl >/dev/null 2>&1 || { echo "note: no .whl carried"; return 0; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl >/dev/null 2>&1 ||
    { echo "the carried wheels did not install"; return 1; }
  touch /tmp/site/.recipes-installed
}

WHEEL_PACKAGES="trl datasets dill multiprocess gguf fastapi starlette uvicorn pydantic
pydantic_core annotated-types typing-inspection typing_extensions opentelemetry-api"

wheels_download() {
  local specs=() name spec
  for name in $WHEEL_PACKAGES; do
    spec=$(grep -i "^${name}==" requirements.lock) ||
      { echo "not in requirements.lock: $name" >&2; return 2; }
    specs+=("$spec")
  done
  rm -rf .whl && mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_28_x86_64 --platform any -d .whl "${specs[@]}"
  ls .whl && du -sh .whl
}

chunks_prepare() {
  local dir=$1 tmp
  shift
  tmp=$(mktemp -d)
  cp "$@" "$tmp/"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$tmp" && sha256sum ./*) >"$dir/MANIFEST"
  (cd "$tmp" && tar cf - ./*) | split -b "$CHUNK_BYTES" -d -a 2 - "$dir/chunk-"
  echo "chunks $(ls "$dir"/chunk-* | wc -l)" >>"$dir/MANIFEST"
  rm -rf "$tmp"
  ls -l "$dir"
}

chunks_receive() {
  local dir=$1 store=$2 chunk want
  need "$dir/MANIFEST" "carry $dir (made here as docs/benchmarks.md, 'How to re-run', says)"
  mkdir -p "$store"
  cp "$dir/MANIFEST" "$store/"
  for chunk in "$dir"/chunk-*; do [ -f "$chunk" ] && cp "$chunk" "$store/"; done
  want=$(awk '/^chunks/ {print $2}' "$store/MANIFEST")
  echo "chunks of $dir here: $(ls "$store"/chunk-* 2>/dev/null | wc -l) of $want"
}

chunks_install() {
  local store=$1 want have
  want=$(awk '/^chunks/ {print $2}' "$store/MANIFEST")
  have=$(ls "$store"/chunk-* 2>/dev/null | wc -l)
  [ "$have" = "$want" ] || { echo "chunks in $store: $have of $want" >&2; return 2; }
  rm -rf "$store.files" && mkdir -p "$store.files"
  cat "$store"/chunk-* | tar xf - -C "$store.files"
  (cd "$store.files" && grep -v '^chunks' "$store/MANIFEST" | sha256sum -c --quiet) || return 1
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    "$store.files"/*.whl || return 1
  rm -rf "$store.files"
  echo "installed into /tmp/site from $store (SHA-256 checked)"
}

quiet() {
  grep --line-buffered -vE 'it/s\]|s/it\]|Warning|warn\(|^[0-9-]+ [0-9:,]+\s+(INFO|WARNING) |^\s*$'
}

joined() { tr -s ' ' | paste -sd';' | sed 's/;/ ; /g'; }

fields() {
  python3 -c 'import json, sys
try:
    d = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no figures: {e}")
print(" ".join(f"{k}={d.get(k)}" for k in sys.argv[2:]))' "$@"
}
