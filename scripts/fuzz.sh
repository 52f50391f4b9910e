#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer, UndefinedBehaviorSanitizer;
# ./build-sanitize) and fuzzes each for N seconds from its seed corpus in
# tests/fuzz/corpus/<target>/. A crash, leak, undefined behaviour or an exception
# other than rlcore::Error fails the run, naming the target and printing the path
# of the input that did it (kept in build-sanitize/fuzz-artifacts/).
#
#   bash scripts/fuzz.sh [--seconds N] [TARGET...]   default: 20 s each (CI runs 10), every target
#
# Targets: config safetensors control_frames tokenizer_json serve_requests dataset_jsonl dataset_parquet.
# New inputs the fuzzers find interesting go to build-sanitize/fuzz-corpus/<target>;
# to keep some, minimize them into the seed corpus:
#   build-sanitize/bin/fuzz_<target> -merge=1 tests/fuzz/corpus/<target> build-sanitize/fuzz-corpus/<target>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=20
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "[fuzz] error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds" in ''|*[!0-9]*|0) echo "[fuzz] error: --seconds must be a positive whole number, got '$seconds'" >&2; exit 2 ;; esac
build_dir=${RLCORE_BUILD_DIR:-build-sanitize}
RLCORE_BUILD_DIR=$build_dir bash scripts/build.sh --sanitize
export RLCORE_FUZZ_SECONDS=$seconds
cd "$build_dir"
selection=(-L '^fuzz$')
if [ ${#targets[@]} -gt 0 ]; then
  selection=(-R "^fuzz_($(IFS='|'; echo "${targets[*]}"))\$")
fi
echo "[fuzz] fuzzing for $seconds s per target"
if ! ctest --output-on-failure --no-tests=error -j "$(nproc)" "${selection[@]}"; then
  echo "[fuzz] error: these fuzz targets failed (their failing inputs are printed above with '[fuzz]'):" >&2
  sed 's/^[0-9]*:/[fuzz]   /' Testing/Temporary/LastTestsFailed.log >&2
  exit 1
fi
