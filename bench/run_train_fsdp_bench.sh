#!/usr/bin/env bash
# FSDP training benchmark end to end: builds bench_train_fsdp and the rlcore
# CLI, writes random llama checkpoints with `rlcore model init`, and prints the
# fsdp vs eager-PyTorch table with the fraction of the matmul roofline, in fp32
# and bf16, with and without offload (docs/train-fsdp.md; on a GPU with
# --device cuda, docs/gpu.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
work_dir=
models=tiny,100m
ranks=1,2,4
dtypes=float32,bfloat16
python=/usr/bin/python3
steps=3
rounds=2
batch=8
prompt=32
response=32
threads=2
jobs=2
build=1
device=cpu

usage() {
  cat <<EOF
usage: bench/run_train_fsdp_bench.sh [options]
  --quick            tiny model only
  --models LIST      tiny,100m (default: $models)
  --ranks LIST       default: $ranks
  --dtypes LIST      float32,bfloat16 (default: $dtypes)
  --python PATH      python with torch for the eager baseline (default: $python); "none" skips it
  --steps N          timed steps after one warm-up (default: $steps)
  --rounds N         times every run is repeated, interleaved with the others; the fastest
                     is kept, as the machine may be shared (default: $rounds)
  --batch N          global rows per step (default: $batch)
  --prompt N         prompt tokens per row (default: $prompt)
  --response N       response tokens per row (default: $response)
  --threads N        intra-op threads, split among the ranks (default: $threads)
  --device D         cpu or cuda (default: $device); cuda runs one rank, no CPU baselines
  --build-dir DIR    CMake build directory (default: $build_dir; configured if needed)
  --work-dir DIR     where checkpoints and results go (default: BUILD_DIR/bench-train-fsdp)
  --jobs N           ninja -j (default: $jobs)
  --no-build         use the binaries already built
EOF
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) models=tiny; shift ;;
    --models) models=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --prompt) prompt=$2; shift 2 ;;
    --response) response=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --work-dir) work_dir=$(realpath -m "$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_train_fsdp_bench.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
work_dir=${work_dir:-$build_dir/bench-train-fsdp}

if [[ $build == 1 ]]; then
  [[ -f $build_dir/build.ninja ]] || cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  ninja -C "$build_dir" -j "$jobs" bench_train_fsdp rlcore
fi

mkdir -p "$work_dir"
model_args=()
IFS=, read -ra sizes <<<"$models"
for size in "${sizes[@]}"; do
  dir=$work_dir/llama-$size
  # Seeded, so a checkpoint left by an earlier run is the same one.
  [[ -f $dir/config.json ]] || "$build_dir/bin/rlcore" model init --arch llama --size "$size" --seed 0 --out "$dir" >/dev/null
  model_args+=(--model "$size=$dir")
done

if [[ $device == cuda ]]; then
  ranks=1       # NCCL gives each rank a GPU of its own
  python=none   # the eager and libtorch baselines run on the CPU
fi
python_args=()
if [[ $python != none ]]; then
  "$python" -c 'import torch' || { echo "run_train_fsdp_bench.sh: $python has no torch (use Debian's /usr/bin/python3 or --python none)" >&2; exit 1; }
  python_args=(--python "$python" --baseline-script "$repo/bench/python/train_baseline.py")
fi

# Before the exports below: nproc honours OMP_NUM_THREADS.
echo "machine: $(nproc) cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')), load average $(cut -d' ' -f1-3 /proc/loadavg) before the run"
# The same thread settings for every process, C++ and Python (libtorch's OpenMP
# pool and OpenBLAS's): PASSIVE keeps idle OpenMP threads from spinning against
# OpenBLAS's pool on 2 cores, which costs fp32 GEMMs several times over.
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
"$build_dir/bin/bench_train_fsdp" "${model_args[@]}" --ranks "$ranks" --dtypes "$dtypes" --steps "$steps" --rounds "$rounds" \
  --batch "$batch" --prompt "$prompt" --response "$response" --threads "$threads" --work "$work_dir/results" \
  --device "$device" "${python_args[@]}"
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
