#!/usr/bin/env bash
# Runs one libFuzzer target for $RLCORE_FUZZ_SECONDS (default 20) from its seed
# corpus, growing a scratch corpus; a crash's input goes to the artifacts
# directory. Used by ctest (tests/fuzz/CMakeLists.txt) and scripts/fuzz.sh.
#   run_fuzz_target.sh BINARY SEED_CORPUS SCRATCH_CORPUS ARTIFACT_PREFIX
set -euo pipefail
binary=$1 seeds=$2 scratch=$3 artifacts=$4
mkdir -p "$scratch" "$(dirname "$artifacts")"
exec "$binary" -max_total_time="${RLCORE_FUZZ_SECONDS:-20}" -timeout=10 -rss_limit_mb=3072 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts" "$scratch" "$seeds"
