#!/usr/bin/env bash
# Installs the SDK package from a build tree, builds examples/hello-plugin out of
# tree against it, and loads that plugin with the *installed* rlcore; then follows
# docs/plugin-authors.md: copies examples/engine-template into an empty folder,
# builds it and runs the installed `rlcore conformance` on it.
# usage: scripts/check_sdk_package.sh BUILD_DIR
set -euo pipefail
build_dir=$(realpath "$1")
source_dir=$(cd "$(dirname "$0")/.." && pwd)
work="$build_dir/sdk-package"
prefix="$work/prefix"
rm -rf "$work"

echo "[sdk-package] installing to $prefix"
cmake --install "$build_dir" --prefix "$prefix" > "$work.install.log" 2>&1 || { cat "$work.install.log"; exit 1; }

echo "[sdk-package] building examples/hello-plugin against the installed SDK"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# ccache as scripts/build.sh sets it up, so a warm CI reuses these two plugins' objects too: paths
# relative to the checkout (the installed headers are under it), their fresh mtimes no obstacle.
if command -v ccache >/dev/null; then
  generator+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$source_dir" CCACHE_NOHASHDIR=true
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
fi
cmake -S "$source_dir/examples/hello-plugin" -B "$work/hello" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/hello" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

rlcore="$prefix/bin/rlcore"
listing=$("$rlcore" plugins --plugins "$work/hello")
echo "$listing"
grep -Eq "reward +keywords +hello-keywords " <<< "$listing" || { echo "FAIL: installed rlcore did not load hello-keywords"; exit 1; }
grep -Eq "reward +gsm8k " <<< "$listing" || { echo "FAIL: installed rlcore did not find its own reward plugin"; exit 1; }

scores=$(printf '%s\n' '{"response": "Paris is the capital of France", "ground_truth": "paris, france"}' \
                       '{"response": "Berlin", "ground_truth": "paris, france"}' |
         "$rlcore" grade --plugins "$work/hello" --grader keywords)
echo "$scores"
[ "$(sed -n 1p <<< "$scores")" = '{"found":2.0,"score":1.0}' ] || { echo "FAIL: unexpected score line 1"; exit 1; }
[ "$(sed -n 2p <<< "$scores")" = '{"found":0.0,"score":0.0}' ] || { echo "FAIL: unexpected score line 2"; exit 1; }
echo "[sdk-package] building examples/engine-template against the installed SDK (docs/plugin-authors.md)"
mkdir -p "$work/my-engine"
cp "$source_dir"/examples/engine-template/* "$work/my-engine/"
cmake -S "$work/my-engine" -B "$work/my-engine/build" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/template-configure.log" 2>&1 ||
  { cat "$work/template-configure.log"; exit 1; }
cmake --build "$work/my-engine/build" > "$work/template-build.log" 2>&1 || { cat "$work/template-build.log"; exit 1; }

echo "[sdk-package] installed rlcore conformance --plugins <template build dir>"
status=0
report=$("$rlcore" conformance --plugins "$work/my-engine/build" 2>"$work/conformance.err") || status=$?
echo "$report"
[ "$status" -eq 0 ] || { cat "$work/conformance.err"; echo "FAIL: conformance exited with $status"; exit 1; }
for component in train_engine/template_train inference_engine/template_infer; do
  grep -Eq "^$component +create +pass" <<< "$report" || { echo "FAIL: $component was not checked"; exit 1; }
done
grep -Eq "^25 checks: 19 passed, 0 failed, 6 not applicable, 0 skipped$" <<< "$report" ||
  { echo "FAIL: unexpected conformance summary"; exit 1; }
echo "[sdk-package] OK"
