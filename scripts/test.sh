#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest) that runs without a GPU.
#
#   bash scripts/test.sh              the CPU flavour (Debian's libtorch), in ./build
#   bash scripts/test.sh --cuda       the CUDA flavour (libtorch 2.x), in ./build-cuda:
#                                     the same CPU suite, against the other libtorch
#   bash scripts/test.sh --sanitize   the CPU suite built with clang, AddressSanitizer and
#                                     UndefinedBehaviorSanitizer, in ./build-sanitize, with
#                                     every fuzz target's seed corpus replayed once
#
# The GPU tests (ctest label `cuda`) run with scripts/gpu-check.sh; the fuzzing
# campaigns (label `fuzz`) with scripts/fuzz.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=()
build_dir=${RLCORE_BUILD_DIR:-build}
exclude=cuda
case "${1:-}" in
  "") ;;
  --cuda) flavour=(--cuda); build_dir=${RLCORE_BUILD_DIR:-build-cuda} ;;
  --sanitize)
    flavour=(--sanitize); build_dir=${RLCORE_BUILD_DIR:-build-sanitize}
    # Left out of the sanitized run (docs/testing.md#sanitizers):
    #   not_sanitized  tests/e2e/*_test, worker_faults*_test, checkpoint_crash_test: multi-process trainer
    #                  runs, several times slower under ASan, which would take the flavour past
    #                  CI's budget; the code they drive runs sanitized in the unit and plugin
    #                  tests. sdk_package: builds a plugin outside this build, with gcc.
    #   fuzz           time-bounded fuzzing, which scripts/fuzz.sh runs (.ci/run does, next).
    exclude="cuda|not_sanitized|fuzz" ;;
  *) echo "[test] error: unknown argument '$1' (--cuda, --sanitize or nothing)" >&2; exit 2 ;;
esac
# The test-time references (transformers, tokenizers, pyarrow, tensorboard,
# openai) live in .venv; tests/common/reference_python.h finds it.
bash scripts/setup_python.sh
export RLCORE_PYTHON="$PWD/.venv/bin/python"
bash scripts/build.sh "${flavour[@]}"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)" --label-exclude "^($exclude)\$"
