#!/usr/bin/env bash
# Resharding benchmark of the hybrid engine over real ranks: builds bench_reshard
# and the plugins, writes a random bf16 llama checkpoint per size with
# `rlcore model init` (kept in BUILD_DIR/bench-reshard, seeded), and prints one
# row per (case, mode): fsdp dp=2 -> tp=1, fsdp dp=4 -> tp=2 dp=2, and the
# train-megatron cases tp=2 -> tp=1, tp=1 -> tp=2, pp=2 -> pp=1, tp=2 pp=2 -> tp=1. Mode "apart"
# is bucketed with hybrid_engine.gather_into_bucket: false (fsdp units gathered, then copied in).
#   bench/run_reshard_bench.sh [--build-dir DIR] [--models tiny,100m] [--modes bucketed,apart,naive]
#                              [--rollout-dtype D] [--reps N] [--no-build]
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
models=100m
modes=bucketed,apart,naive
rollout_dtype=bfloat16
reps=3
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --models) models=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --rollout-dtype) rollout_dtype=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run_reshard_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $build == 1 ]]; then ninja -C "$build_dir" -j2 bench_reshard rlcore; fi
work=$build_dir/bench-reshard
mkdir -p "$work"
# One intra-op thread per rank (up to 4 ranks share 2 cores); idle threads sleep.
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

cases=(
  "--world 2"
  "--world 4 --tp 2"
  "--world 2 --trainer megatron --train-tp 2"
  "--world 2 --trainer megatron --tp 2"
  "--world 2 --trainer megatron --train-pp 2"
  "--world 4 --trainer megatron --train-tp 2 --train-pp 2"
)
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $(free -g | awk '/^Mem:/ {print $7}') GiB available"
header=--header
for size in ${models//,/ }; do
  if [[ ! -f $work/$size/config.json ]]; then
    "$build_dir/bin/rlcore" model init --arch llama --size "$size" --dtype bfloat16 --seed 0 --out "$work/$size" --force >/dev/null
  fi
  echo "model $size"
  for case in "${cases[@]}"; do
    for mode in ${modes//,/ }; do
      mode_args=(--mode "$mode")
      if [[ $mode == apart ]]; then
        # Only fsdp gathers into the bucket: elsewhere "apart" is plain bucketed.
        [[ $case == *megatron* || $case == *--tp* ]] && continue
        mode_args=(--mode bucketed --gather-into-bucket false)
      fi
      # shellcheck disable=SC2086
      "$build_dir/bin/bench_reshard" --model "$work/$size" --plugins "$build_dir/plugins" $case "${mode_args[@]}" \
        --rollout-dtype "$rollout_dtype" --reps "$reps" $header
      header=
    done
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
