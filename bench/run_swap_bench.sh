#!/usr/bin/env bash
# Hybrid-engine swap benchmark: builds bench_swap and the rlcore CLI, writes
# random bf16 llama checkpoints with `rlcore model init`, and prints the
# bucketed-vs-naive table of docs/hybrid-engine.md. Each row is its own process
# (peak RSS is per process).
#   bench/run_swap_bench.sh [--build-dir DIR] [--models tiny,100m] [--reps N] [--threads N] [--no-build]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
models=tiny,100m
reps=3
threads=2
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $build == 1 ]]; then ninja -C "$build_dir" -j2 bench_swap rlcore; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
header=--header
for size in ${models//,/ }; do
  "$build_dir/bin/rlcore" model init --arch llama --size "$size" --dtype bfloat16 --out "$work/$size" >/dev/null
  for mode in bucketed naive; do
    "$build_dir/bin/bench_swap" --model "$work/$size" --mode "$mode" --reps "$reps" --threads "$threads" $header
    header=
  done
done
