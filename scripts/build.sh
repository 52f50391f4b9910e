#!/usr/bin/env bash
# Installs what rlcore needs (scripts/setup.sh), then configures and builds it
# into ./build (or $RLCORE_BUILD_DIR). Extra arguments are ninja targets.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build_dir=${RLCORE_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  echo "[build] configuring $build_dir"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
echo "[build] building with $(nproc) jobs"
cmake --build "$build_dir" -j "$(nproc)" ${1:+--target "$@"}
