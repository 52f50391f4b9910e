#!/usr/bin/env bash
# Hybrid-engine swap benchmark: builds bench_swap and the rlcore CLI, writes
# random bf16 llama checkpoints with `rlcore model init` (kept in
# BUILD_DIR/bench-swap and reused: seeded), and prints the bucketed-vs-naive
# table of docs/hybrid-engine.md for each (training compute dtype : rollout
# dtype) pair. fsdp keeps fp32 masters, so every pair swaps from fp32: to bf16
# (a cast) or to fp32 (a plain copy). Each row is its own process (the measured peak is per process).
#   bench/run_swap_bench.sh [--build-dir DIR] [--models tiny,100m,1b] [--pairs float32:bfloat16,...]
#                           [--modes bucketed,naive] [--releases lazy_free,unmap] [--reps N]
#                           [--threads N] [--device cpu|cuda] [--lora-rank R] [--no-build]
# --releases applies to bucketed rows (hybrid_engine.bucket_release). --lora-rank R gives the
# actor LoRA adapters on every projection and runs each bucketed row twice: the base cached
# after the first swap (the default) and gathered on every swap (lora_base_cache: false).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
models=tiny,100m
# float32:bfloat16 is the quickstart (fp32 training, bf16 checkpoint served in bf16).
pairs=float32:bfloat16,bfloat16:bfloat16,float32:float32
modes=bucketed,naive
releases=lazy_free,unmap
reps=3
threads=1
build=1
device=cpu
lora_rank=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --models) models=$2; shift 2 ;;
    --pairs) pairs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --releases) releases=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --lora-rank) lora_rank=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run_swap_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $build == 1 ]]; then ninja -C "$build_dir" -j2 bench_swap rlcore; fi
work=$build_dir/bench-swap
mkdir -p "$work"
# Idle libgomp threads must sleep, not spin against the copy threads (2 cores).
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(free -g | awk '/^Mem:/ {print $7}') GiB available"
header=--header
for size in ${models//,/ }; do
  if [[ ! -f $work/$size/config.json ]]; then
    "$build_dir/bin/rlcore" model init --arch llama --size "$size" --dtype bfloat16 --seed 0 --out "$work/$size" --force >/dev/null
  fi
  for pair in ${pairs//,/ }; do
    train_dtype=${pair%%:*} rollout_dtype=${pair##*:}
    for mode in ${modes//,/ }; do
      mode_releases=$releases
      [[ $mode == naive ]] && mode_releases=unmap  # naive keeps no bucket
      caches=true
      [[ $lora_rank != 0 && $mode == bucketed ]] && caches="true false"
      for release in ${mode_releases//,/ }; do
        for cache in $caches; do
          "$build_dir/bin/bench_swap" --model "$work/$size" --mode "$mode" --bucket-release "$release" --reps "$reps" \
            --threads "$threads" --train-dtype "$train_dtype" --rollout-dtype "$rollout_dtype" --device "$device" \
            --lora-rank "$lora_rank" --lora-base-cache "$cache" $header
          header=
        done
      done
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
