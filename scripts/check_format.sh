#!/usr/bin/env bash
# Checks (or, with --fix, applies) .clang-format on every tracked C++ and CUDA
# file except generated ones (their header says "do not edit"). CI runs the check.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=$(command -v clang-format-14 || command -v clang-format || true)
if [[ -z "$clang_format" ]]; then
  echo "check_format.sh: clang-format-14 is not installed (apt-get install clang-format-14)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | while read -r f; do
  head -3 "$f" | grep -q "do not edit" || echo "$f"
done)
if [[ "${1:-}" == "--fix" ]]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
if ! "$clang_format" --dry-run --Werror "${files[@]}" 2> /tmp/rlcore-format.$$; then
  grep -E '^[^ ].*: error:' /tmp/rlcore-format.$$ | cut -d: -f1 | sort -u | sed 's/^/  not formatted: /' >&2
  rm -f /tmp/rlcore-format.$$
  echo "check_format.sh: run scripts/check_format.sh --fix (or git clang-format-14 on your change)" >&2
  exit 1
fi
rm -f /tmp/rlcore-format.$$
echo "check_format.sh: ${#files[@]} files formatted"
