#!/usr/bin/env bash
# Installs what rlcore needs (scripts/setup.sh), then configures and builds it
# into ./build (or $RLCORE_BUILD_DIR). Extra arguments are ninja targets.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere
# reuses the objects; the sloppiness lets it cache files built with the PCH.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
build_dir=${RLCORE_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  echo "[build] configuring $build_dir"
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
echo "[build] building with $(nproc) jobs"
cmake --build "$build_dir" -j "$(nproc)" ${1:+--target "$@"}
