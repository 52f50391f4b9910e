#!/usr/bin/env bash
# Generation benchmark end to end: builds bench_generation, the rlcore CLI and
# the infer-native plugin, writes random checkpoints (llama, or --arch) with
# `rlcore model init`, and prints the rlcore-vs-PyTorch table (docs/bench-generation.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
work_dir=
models=tiny,100m
dtypes=float32,bfloat16
batches=1,8,64
threads=2
repeats=3
jobs=2
python=/usr/bin/python3
build=1
device=cpu
arch=llama
baseline_kind=
extra_args=()

usage() {
  cat <<EOF
usage: bench/run_generation_bench.sh [options]
  --quick            tiny model only, batches 1 and 8 (both dtypes)
  --models LIST      tiny,100m (default: $models)
  --dtypes LIST      float32,bfloat16 (default: $dtypes)
  --batches LIST     default: $batches
  --threads N        intra-op threads of both implementations (default: $threads)
  --repeats N        timed runs per configuration, best reported (default: $repeats)
  --build-dir DIR    CMake build directory (default: $build_dir; configured if needed)
  --work-dir DIR     where checkpoints and results go (default: BUILD_DIR/bench-generation)
  --jobs N           ninja -j (default: $jobs)
  --python PATH      python with torch for the baseline (default: $python); "none" skips it
  --no-build         use the binaries already built
  --device DEV       cpu (default) or cuda: on a GPU the baseline is transformers' eager generate
                     (bench/python/hf_generate_baseline.py; --python must have transformers)
  --cuda-graphs      also time rlcore with rollout.enforce_eager: false (needs --device cuda)
  --arch ARCH        the checkpoints' architecture (rlcore model init --arch; default: $arch)
  --baseline KIND    torch (the plain PyTorch loop, the CPU default) or transformers (its generate:
                     the GPU default, and on the CPU the only baseline for --arch qwen3_moe)
EOF
}

while [[ $# -gt 0 ]]; do
  case $1 in
    --quick) models=tiny; batches=1,8; shift ;;
    --models) models=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --work-dir) work_dir=$(realpath -m "$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --device) device=$2; shift 2 ;;
    --cuda-graphs) extra_args+=(--cuda-graphs); shift ;;
    --arch) arch=$2; shift 2 ;;
    --baseline) baseline_kind=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run_generation_bench.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
work_dir=${work_dir:-$build_dir/bench-generation}

if [[ $build == 1 ]]; then
  if [[ ! -f $build_dir/build.ninja ]]; then
    cmake -G Ninja -S "$repo" -B "$build_dir"
  fi
  ninja -C "$build_dir" -j"$jobs" rlcore rlcore-infer-native bench_generation
fi
for binary in "$build_dir/bin/rlcore" "$build_dir/bin/bench_generation"; do
  [[ -x $binary ]] || { echo "run_generation_bench.sh: $binary is not built" >&2; exit 1; }
done

mkdir -p "$work_dir"
model_args=()
IFS=, read -ra model_list <<< "$models"
for size in "${model_list[@]}"; do
  case $size in tiny|100m) ;; *) echo "run_generation_bench.sh: unknown model '$size' (tiny, 100m)" >&2; exit 2 ;; esac
  dir=$work_dir/$arch-$size
  # Seeded, so a checkpoint left by an earlier run is the same one.
  if [[ ! -f $dir/config.json ]]; then
    "$build_dir/bin/rlcore" model init --arch "$arch" --size "$size" --seed 0 --out "$dir" --force
  fi
  model_args+=(--model "$size=$dir")
done

python_args=()
if [[ $python != none ]]; then
  "$python" -c 'import torch' || { echo "run_generation_bench.sh: $python has no torch (use Debian's /usr/bin/python3 or --python none)" >&2; exit 1; }
  baseline_kind=${baseline_kind:-$([[ $device == cpu && $arch != *moe* ]] && echo torch || echo transformers)}
  case $baseline_kind in
    torch)
      [[ $arch != *moe* ]] || { echo "run_generation_bench.sh: the torch baseline computes dense models only; use --baseline transformers" >&2; exit 2; }
      baseline=$repo/bench/python/generate_baseline.py ;;
    transformers) baseline=$repo/bench/python/hf_generate_baseline.py ;;
    *) echo "run_generation_bench.sh: unknown baseline '$baseline_kind' (torch, transformers)" >&2; exit 2 ;;
  esac
  python_args=(--python "$python" --baseline-script "$baseline")
fi

# Before the exports below: nproc honours OMP_NUM_THREADS.
gpu=
[[ $device == cpu ]] || gpu="$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1); "
machine="$gpu$(nproc) cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')), $(free -g | awk '/^Mem:/ {print $2}') GiB, $(. /etc/os-release && echo "$PRETTY_NAME")"
# Same thread settings for both processes (libtorch's OpenMP pool and BLAS).
# PASSIVE: idle libgomp threads sleep instead of spinning against OpenBLAS's
# pool on 2 cores (as the worker launcher sets it). A GOMP_SPINCOUNT set by the
# caller reaches both processes (docs/bench-generation.md compares the two).
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE

results=$work_dir/results.md
{
  echo "machine: $machine; load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$build_dir/bin/bench_generation" "${model_args[@]}" --dtypes "$dtypes" --batches "$batches" \
    --threads "$threads" --repeats "$repeats" --device "$device" "${python_args[@]}" "${extra_args[@]}"
  echo
  echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$results"
echo "run_generation_bench.sh: table saved to $results" >&2
