#!/usr/bin/env bash
# Scheduling benchmark of infer-native (issue 36): builds bench_scheduling,
# writes a random qwen2 checkpoint with `rlcore model init`, and prints the
# long-tailed (continuous vs static batching) and shared-prefill tables.
#   bench/run_scheduling_bench.sh [--size tiny|100m] [--build-dir DIR] [--no-build] [bench_scheduling options...]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
size=tiny
build=1
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --size) size=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done
if [[ $build == 1 ]]; then RLCORE_BUILD_DIR=$build_dir bash "$repo/scripts/build.sh" bench_scheduling rlcore >/dev/null; fi
work=$build_dir/bench-scheduling
model=$work/qwen2-$size
mkdir -p "$work"
[[ -f $model/config.json ]] ||
  "$build_dir/bin/rlcore" model init --arch qwen2 --size "$size" --seed 0 --out "$model" --force >/dev/null
echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/ {print $2}') GiB;" \
  "$(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"
"$build_dir/bin/bench_scheduling" --model "$model" "${extra[@]}"
