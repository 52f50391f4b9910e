#!/usr/bin/env bash
# Runs one libFuzzer target for $RLCORE_FUZZ_SECONDS (default 20) from its seed
# corpus, growing a scratch corpus. On a crash, leak, undefined behaviour or an
# exception other than rlcore::Error it fails, naming the target and the input
# libFuzzer kept under the artifact prefix. Used by ctest (tests/fuzz/CMakeLists.txt),
# which scripts/fuzz.sh runs.
#   run_fuzz_target.sh BINARY SEED_CORPUS SCRATCH_CORPUS ARTIFACT_PREFIX
set -euo pipefail
binary=$1 seeds=$2 scratch=$3 artifacts=$4
name=$(basename "$binary")
mkdir -p "$scratch" "$(dirname "$artifacts")"
since=$(mktemp)
trap 'rm -f "$since"' EXIT
rc=0
"$binary" -max_total_time="${RLCORE_FUZZ_SECONDS:-20}" -timeout=10 -rss_limit_mb=3072 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts" "$scratch" "$seeds" || rc=$?
if [ "$rc" != 0 ]; then
  echo "[fuzz] FAILED: $name (exit $rc). Its failing input:" >&2
  find "$(dirname "$artifacts")" -name "$(basename "$artifacts")*" -newer "$since" -printf '[fuzz]   %p\n' >&2
  echo "[fuzz] rerun one with: $binary INPUT" >&2
fi
exit "$rc"
