#!/usr/bin/env bash
# Checks that each built flavour's cold build stays within CI's budget: counts the
# compilations of its default targets (what a build from nothing runs) against a
# ceiling, and prints the compile time the last build logged and its slowest units.
# A count, not a time, is asserted: it does not depend on the machine or its load.
#
#   bash scripts/ci-budget.sh BUILD_DIR...      (.ci/run: build build-cuda build-sanitize)
#
# Raising a ceiling is a decision: say in docs/testing.md#build-time what the new
# compilations buy and what the cold CI run measures with them.
set -euo pipefail
cd "$(dirname "$0")/.."

# Compilations of a cold build per flavour (2026-11-28, unity batches of 16: 81, 76 and 83;
# 392, 399 and 393 before unity builds).
# CPU 91 since issue 53: rlcore_json_lines_process, the helper the reward and tools plugins share;
# 92: libs/model's one file per architecture (21 sources, a second unity batch).
declare -A ceiling=([cpu]=92 [cuda]=85 [sanitize]=95)

flavour_of() {
  local cache=$1/CMakeCache.txt
  if grep -q '^RLCORE_SANITIZE:BOOL=ON' "$cache" || grep -q '^RLCORE_FUZZ:BOOL=ON' "$cache"; then
    echo sanitize
  elif grep -q '^RLCORE_WITH_CUDA:INTERNAL=ON' "$cache"; then
    echo cuda
  else
    echo cpu
  fi
}

status=0
for dir in "$@"; do
  [ -f "$dir/build.ninja" ] || { echo "[ci-budget] error: $dir has no build.ninja (not configured)" >&2; exit 2; }
  flavour=$(flavour_of "$dir")
  count=$(ninja -C "$dir" -t commands all | grep -c -E '(^| )-c ')
  # The newest entry of each output in .ninja_log: start and end in ms.
  read -r seconds units < <(awk 'NR > 1 && $4 ~ /\.(o|gch|pch)$/ {t[$4] = ($2 - $1) / 1000}
                                 END {for (o in t) s += t[o]; printf "%.0f %d\n", s, length(t)}' "$dir/.ninja_log")
  echo "[ci-budget] $dir ($flavour): $count compilations (ceiling ${ceiling[$flavour]});" \
       "the last builds logged $seconds s of compiling over $units units; slowest:"
  awk 'NR > 1 && $4 ~ /\.(o|gch|pch)$/ {t[$4] = ($2 - $1) / 1000}
       END {for (o in t) printf "  %6.1f s  %s\n", t[o], o}' "$dir/.ninja_log" | sort -rn | sed -n 1,5p
  if [ "$count" -gt "${ceiling[$flavour]}" ]; then
    echo "[ci-budget] error: $dir compiles $count units, over the $flavour flavour's ceiling of" \
         "${ceiling[$flavour]} (docs/testing.md#build-time)" >&2
    status=1
  fi
done
exit $status
