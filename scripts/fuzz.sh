#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer, UndefinedBehaviorSanitizer;
# ./build-sanitize) and runs each for a while from its seed corpus in
# tests/fuzz/corpus/. A crash, leak or undefined behaviour fails the run, naming
# the target; its input is kept in build-sanitize/fuzz-artifacts/.
#
#   bash scripts/fuzz.sh [--seconds N] [TARGET...]   default: 300 s each, every target
#
# Targets: config safetensors control_frames tokenizer_json serve_requests dataset_jsonl.
# New inputs the fuzzers find interesting go to build-sanitize/fuzz-corpus/<target>;
# to keep some, minimize them into the seed corpus:
#   build-sanitize/bin/fuzz_<target> -merge=1 tests/fuzz/corpus/<target> build-sanitize/fuzz-corpus/<target>
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=300
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "[fuzz] error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
case "$seconds" in ''|*[!0-9]*) echo "[fuzz] error: --seconds must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
bash scripts/build.sh --sanitize
export RLCORE_FUZZ_SECONDS=$seconds
cd build-sanitize
if [ ${#targets[@]} -eq 0 ]; then
  ctest --output-on-failure -j "$(nproc)" -L fuzz
else
  ctest --output-on-failure -j "$(nproc)" -R "^fuzz_($(IFS='|'; echo "${targets[*]}"))\$"
fi
