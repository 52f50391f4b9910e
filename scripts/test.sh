#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
build_dir=${RLCORE_BUILD_DIR:-build}
cd "$build_dir"
ctest --output-on-failure -j "$(nproc)"
