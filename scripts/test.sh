#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest) that runs without a GPU.
#
#   bash scripts/test.sh              the CPU flavour (Debian's libtorch), in ./build
#   bash scripts/test.sh --cuda       the CUDA flavour (libtorch 2.x), in ./build-cuda:
#                                     the tests whose outcome depends on libtorch
#                                     (label libtorch; docs/testing.md#flavours)
#   bash scripts/test.sh --sanitize   the CPU suite built with clang, AddressSanitizer and
#                                     UndefinedBehaviorSanitizer, in ./build-sanitize, with
#                                     every fuzz target's seed corpus replayed once
#
# The GPU tests (ctest label `cuda`) run with scripts/gpu-check.sh; the fuzzing
# campaigns (label `fuzz`) with scripts/fuzz.sh. Each phase prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=()
build_dir=${RLCORE_BUILD_DIR:-build}
selection=(--label-exclude '^(cuda)$')
case "${1:-}" in
  "") ;;
  --cuda)
    flavour=(--cuda); build_dir=${RLCORE_BUILD_DIR:-build-cuda}
    selection=(--label-regex '^libtorch$' --label-exclude '^(cuda)$') ;;
  --sanitize)
    flavour=(--sanitize); build_dir=${RLCORE_BUILD_DIR:-build-sanitize}
    # Left out of the sanitized run (docs/testing.md#sanitizers):
    #   not_sanitized  tests/e2e/*_test, worker_faults*_test, checkpoint_crash_test: multi-process trainer
    #                  runs, several times slower under ASan, which would take the flavour past
    #                  CI's budget; the code they drive runs sanitized in the unit and plugin
    #                  tests. sdk_package: builds a plugin outside this build, with gcc.
    #   fuzz           time-bounded fuzzing, which scripts/fuzz.sh runs (.ci/run does, next).
    selection=(--label-exclude '^(cuda|not_sanitized|fuzz)$') ;;
  *) echo "[test] error: unknown argument '$1' (--cuda, --sanitize or nothing)" >&2; exit 2 ;;
esac

# Prints "[test] <what> done in N s" for the phase that started at $1.
phase_done() { echo "[test] $2 done in $((SECONDS - $1)) s"; }

start=$SECONDS
bash scripts/setup.sh
phase_done "$start" "Debian packages"

# The test-time references (transformers, tokenizers, pyarrow, tensorboard,
# openai) live in .venv (tests/common/reference_python.h finds it). Made beside
# the build: pip downloads while the compiler works. The CUDA flavour builds
# against the torch wheel in it, so scripts/build.sh --cuda waits for it.
# A failed build stops it too (a half-made environment is made again next time).
python_log=$(mktemp)
start=$SECONDS
bash scripts/setup_python.sh >"$python_log" 2>&1 &
python_pid=$!
trap 'pkill -P "$python_pid" 2>/dev/null || true; kill "$python_pid" 2>/dev/null || true; rm -f "$python_log"' EXIT

build_start=$SECONDS
bash scripts/build.sh "${flavour[@]}"
phase_done "$build_start" "build of $build_dir"

if ! wait "$python_pid"; then
  cat "$python_log" >&2
  echo "[test] error: scripts/setup_python.sh failed (above); the tests need its references" >&2
  exit 1
fi
cat "$python_log"
phase_done "$start" "Python references (beside the build)"
export RLCORE_PYTHON="$PWD/.venv/bin/python"
# libtorch 2.x's c10d flight recorder is one process-wide map that Gloo groups created on several
# threads of one process race on (a segfault in the conformance tests' in-process ranks under load;
# real runs have one rank per process). It only records collectives for debugging: off in tests.
export TORCH_FR_BUFFER_SIZE=0

# ctest runs one test per core, and a test's processes share that core: one intra-op thread
# each, and libgomp's idle threads sleep instead of spinning (spinning threads of two tests on
# two cores made a multi-process e2e test 3-5 times slower than alone). A caller's setting wins.
# The job count ignores them: nproc answers OMP_NUM_THREADS when it is set.
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

start=$SECONDS
cd "$build_dir"
ctest --output-on-failure --no-tests=error -j "$jobs" "${selection[@]}"
phase_done "$start" "tests of $build_dir"
