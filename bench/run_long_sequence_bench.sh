#!/usr/bin/env bash
# Long and uneven sequences on the fsdp engine (docs/trainer.md#packing,
# docs/train-fsdp.md#sequence-parallelism): builds bench_long_sequences and the
# rlcore CLI, writes a random tiny llama with `rlcore model init`, then prints
#   1. a ragged batch (long-tailed responses, mean well under the maximum):
#      real tokens/s of the log-prob pass and the train step, packed vs padded;
#   2. one long row under Ulysses sequence parallelism over 1 and 2 processes:
#      peak memory per rank, the activations each rank keeps, the step time,
#      and the longest row within a memory budget;
# then the machine.
#
#   bench/run_long_sequence_bench.sh [--lengths 2048,3072,4096,6144,8192] [--budget-mb 1024] [--steps 2]
#                                    [--threads 2] [--build-dir DIR] [--no-build]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
lengths=2048,3072,4096,6144,8192
budget_mb=1024
steps=2
threads=2
build=1

while [[ $# -gt 0 ]]; do
  case $1 in
    --lengths) lengths=$2; shift 2 ;;
    --budget-mb) budget_mb=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run_long_sequence_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

if [[ $build == 1 ]]; then
  [[ -f $build_dir/build.ninja ]] || cmake -S "$repo" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  ninja -C "$build_dir" bench_long_sequences rlcore
fi
work_dir=$build_dir/bench-long-sequences
model=$work_dir/llama-tiny
mkdir -p "$work_dir"
# Seeded, so a checkpoint left by an earlier run is the same one.
[[ -f $model/config.json ]] || "$build_dir/bin/rlcore" model init --arch llama --size tiny --seed 0 --out "$model" >/dev/null

echo "machine: $(nproc) cores ($(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')), $(free -g | awk '/^Mem:/ {print $2}') GiB, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run; $(date -u +%F)"
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads MKL_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
"$build_dir/bin/bench_long_sequences" --model "$model" --lengths "$lengths" --budget-mb "$budget_mb" \
  --steps "$steps" --threads "$threads" --work "$work_dir/results"
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
