#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest) that runs without a GPU.
#
#   bash scripts/test.sh           the CPU flavour (Debian's libtorch), in ./build
#   bash scripts/test.sh --cuda    the CUDA flavour (libtorch 2.x), in ./build-cuda:
#                                  the same CPU suite, against the other libtorch
#
# The GPU tests (ctest label `cuda`) run with scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=()
build_dir=${RLCORE_BUILD_DIR:-build}
if [ "${1:-}" = --cuda ]; then
  flavour=(--cuda)
  build_dir=${RLCORE_BUILD_DIR:-build-cuda}
elif [ $# -gt 0 ]; then
  echo "[test] error: unknown argument '$1' (--cuda or nothing)" >&2
  exit 2
fi
bash scripts/build.sh "${flavour[@]}"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" --label-exclude cuda
