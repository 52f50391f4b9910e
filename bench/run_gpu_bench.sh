#!/usr/bin/env bash
# The GPU benchmarks (scripts/gpu-check.sh runs them; tables go to docs/gpu.md),
# on cuda: infer-native generation vs Hugging Face transformers' eager
# `generate` (batch 1 and 64, bf16 and fp32, tiny and 100m models), and the
# weight swap's GB/s vs a device-to-device copy of the same bytes and its
# measured peak vs the naive manager's, and the fsdp train step's tokens/s
# with and without parameter + optimizer offload. Fails when no GPU is visible.
# A benchmark that fails is reported and the others still run; the exit status
# says whether all passed.
#
#   bash bench/run_gpu_bench.sh [--build-dir DIR] [--python PATH] [--benches LIST]
#
# --benches: a comma-separated subset of generation,swap,train_fsdp (default all).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$repo/build-cuda
python=python3
benches=generation,swap,train_fsdp
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) build_dir=$(realpath -m "$2"); shift 2 ;;
    --python) python=$2; shift 2 ;;
    --benches) benches=$2; shift 2 ;;
    *) echo "run_gpu_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for bench in ${benches//,/ }; do
  case $bench in
    generation|swap|train_fsdp) ;;
    *) echo "run_gpu_bench.sh: unknown benchmark '$bench' in --benches (expected generation, swap, train_fsdp)" >&2
       exit 2 ;;
  esac
done
nvidia-smi -L >/dev/null 2>&1 || { echo "run_gpu_bench.sh: no GPU is visible" >&2; exit 1; }

run_generation() {
  "$python" -c 'import torch, transformers; assert torch.cuda.is_available()' ||
    { echo "run_gpu_bench.sh: $python needs torch with CUDA and transformers" >&2; return 1; }
  bash "$repo/bench/run_generation_bench.sh" --no-build --build-dir "$build_dir" --device cuda --python "$python" \
    --models tiny,100m --dtypes bfloat16,float32 --batches 1,64 --cuda-graphs
}
run_swap() {
  bash "$repo/bench/run_swap_bench.sh" --no-build --build-dir "$build_dir" --device cuda --models 100m,1b \
    --pairs float32:bfloat16,float32:float32 --releases unmap
}
run_train_fsdp() {
  bash "$repo/bench/run_train_fsdp_bench.sh" --no-build --build-dir "$build_dir" --device cuda --models tiny,100m \
    --dtypes float32,bfloat16 --batch 16 --prompt 128 --response 128
}

failed=()
for bench in ${benches//,/ }; do
  "run_$bench" || { failed+=("$bench"); echo "run_gpu_bench.sh: error: the $bench benchmark failed" >&2; }
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_gpu_bench.sh: failed: ${failed[*]}" >&2
  exit 1
fi
