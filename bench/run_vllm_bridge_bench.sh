#!/usr/bin/env bash
# vllm_bridge benchmark: starts `rlcore serve --dev-mode` on a random llama
# checkpoint (`rlcore model init`, kept in BUILD_DIR/bench-vllm-bridge), then
# prints tokens/s through the bridge vs infer-native in process on the same
# prompts, and a weight update through the disk path vs the disk's write speed.
#   bench/run_vllm_bridge_bench.sh [--build-dir DIR] [--size tiny|100m] [--batches 1,16]
#                                  [--max-tokens N] [--server URL] [--no-build]
# --server uses a running server (vLLM, SGLang) instead; it must serve the same checkpoint.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build
size=100m
batches=1,16
max_tokens=64
server=
build=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --size) size=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --server) server=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    *) echo "run_vllm_bridge_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ $build == 1 ]]; then ninja -C "$build_dir" -j2 bench_vllm_bridge rlcore rlcore-infer-native; fi
work=$build_dir/bench-vllm-bridge
model=$work/llama-$size
mkdir -p "$work"
[[ -f $model/config.json ]] ||
  "$build_dir/bin/rlcore" model init --arch llama --size "$size" --seed 0 --out "$model" --force >/dev/null
echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/Mem:/ {print $2}') GiB"
if [[ -z $server ]]; then
  source "$repo/bench/serve_process.sh"
  trap stop_serve EXIT
  start_serve "$work/serve.log" --model "$model" --dev-mode --plugins "$build_dir/plugins" --log-level warn
fi
"$build_dir/bin/bench_vllm_bridge" --model "$model" --server "$server" --batches "$batches" \
  --max-tokens "$max_tokens" --weights-dir "$work/weights"
