#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest) that runs without a GPU.
#
#   bash scripts/test.sh              the CPU flavour (Debian's libtorch), in ./build
#   bash scripts/test.sh --cuda       the CUDA flavour (libtorch 2.x), in ./build-cuda:
#                                     the same CPU suite, against the other libtorch
#   bash scripts/test.sh --sanitize   the CPU suite built with clang, AddressSanitizer and
#                                     UndefinedBehaviorSanitizer, plus every fuzz target for
#                                     $RLCORE_FUZZ_SECONDS (default 20) each, in ./build-sanitize
#
# The GPU tests (ctest label `cuda`) run with scripts/gpu-check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=()
build_dir=${RLCORE_BUILD_DIR:-build}
case "${1:-}" in
  "") ;;
  --cuda) flavour=(--cuda); build_dir=${RLCORE_BUILD_DIR:-build-cuda} ;;
  --sanitize) flavour=(--sanitize); build_dir=${RLCORE_BUILD_DIR:-build-sanitize} ;;
  *) echo "[test] error: unknown argument '$1' (--cuda, --sanitize or nothing)" >&2; exit 2 ;;
esac
bash scripts/build.sh "${flavour[@]}"
cd "$build_dir"
# Sanitized: the tests labelled not_sanitized are left out (tests/CMakeLists.txt says why).
ctest --output-on-failure -j "$(nproc)" --label-exclude "cuda|not_sanitized"
