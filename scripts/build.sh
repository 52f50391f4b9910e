#!/usr/bin/env bash
# Installs what rlcore needs (scripts/setup.sh, scripts/setup_arrow.sh), then configures and builds it.
#
#   bash scripts/build.sh [TARGET...]          CPU flavour (Debian's libtorch) into ./build
#   bash scripts/build.sh --cuda [TARGET...]   CUDA flavour into ./build-cuda
#   bash scripts/build.sh --sanitize [TARGET...]
#                                              CPU flavour with clang, AddressSanitizer,
#                                              UndefinedBehaviorSanitizer and the libFuzzer
#                                              targets into ./build-sanitize
#
# $RLCORE_BUILD_DIR overrides the build directory. The CUDA flavour builds
# against the CUDA libtorch of $Torch_DIR (any libtorch with CUDA, e.g. an
# unpacked libtorch zip: Torch_DIR=/path/libtorch/share/cmake/Torch) or, when
# unset, the torch wheel that scripts/setup_python.sh installs into .venv; the
# CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) comes from the system (docs/gpu.md).
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=0
sanitize=0
targets=()
for arg in "$@"; do
  case "$arg" in
    --cuda) cuda=1 ;;
    --sanitize) sanitize=1 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "[build] error: unknown option '$arg' (see --help)" >&2; exit 2 ;;
    *) targets+=("$arg") ;;
  esac
done

# RLCORE_SKIP_SETUP=1: the dependencies come from elsewhere (scripts/gpu-check.sh).
[ "${RLCORE_SKIP_SETUP:-0}" = 1 ] || { bash scripts/setup.sh && bash scripts/setup_arrow.sh; }
# ccache keys on paths relative to the checkout, so a fresh clone elsewhere
# reuses the objects; the sloppiness lets it cache files built with the PCH.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime

# A unity build compiles each target's sources in batches of 16: a fifth of the
# compilations, each paying for the headers once (docs/testing.md#build-time).
# RLCORE_UNITY_BUILD=OFF compiles file by file (quicker to rebuild after one edit).
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_UNITY_BUILD="${RLCORE_UNITY_BUILD:-ON}"
            -DCMAKE_UNITY_BUILD_BATCH_SIZE=16)
if [ "$cuda" = 1 ]; then
  build_dir=${RLCORE_BUILD_DIR:-build-cuda}
  if ! command -v nvcc >/dev/null; then
    [ -x /usr/local/cuda/bin/nvcc ] || { echo "[build] error: --cuda needs the CUDA toolkit (nvcc not on PATH nor in /usr/local/cuda/bin)" >&2; exit 1; }
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  if [ -z "${Torch_DIR:-}" ]; then
    bash scripts/setup_python.sh
    Torch_DIR="$PWD/$(.venv/bin/python -c 'import os, torch; print(os.path.relpath(os.path.join(os.path.dirname(torch.__file__), "share/cmake/Torch")))')"
  fi
  [ -f "$Torch_DIR/TorchConfig.cmake" ] || { echo "[build] error: Torch_DIR=$Torch_DIR has no TorchConfig.cmake" >&2; exit 1; }
  # share/cmake/Torch -> the libtorch prefix. On CMAKE_PREFIX_PATH it is searched
  # before /usr, where Debian's CPU libtorch would otherwise be found.
  torch_prefix=$(cd "$Torch_DIR/../../.." && pwd)
  cmake_args+=(-DTorch_DIR="$Torch_DIR" -DCMAKE_PREFIX_PATH="$torch_prefix")
elif [ "$sanitize" = 1 ]; then
  build_dir=${RLCORE_BUILD_DIR:-build-sanitize}
  # The benchmarks measure speed, which a sanitized build does not have.
  # No precompiled header: clang's embeds the checkout's absolute path, so ccache
  # could not reuse a single object of this flavour in a fresh clone (CI).
  cmake_args+=(-DCMAKE_CXX_COMPILER=clang++-14 -DRLCORE_SANITIZE=ON -DRLCORE_FUZZ=ON -DRLCORE_BUILD_BENCH=OFF
               -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON)
else
  build_dir=${RLCORE_BUILD_DIR:-build}
fi
if [ "$cuda" = 1 ] && [ "$sanitize" = 1 ]; then
  echo "[build] error: --cuda and --sanitize are separate flavours; pick one" >&2
  exit 2
fi

if [ ! -f "$build_dir/build.ninja" ]; then
  echo "[build] configuring $build_dir"
  cmake -S . -B "$build_dir" "${cmake_args[@]}"
fi
if [ "$cuda" = 1 ] && ! grep -q '^RLCORE_WITH_CUDA:INTERNAL=ON' "$build_dir/CMakeCache.txt"; then
  echo "[build] error: $build_dir is configured against a libtorch without CUDA (Torch_DIR=$Torch_DIR);" \
       "remove $build_dir or point Torch_DIR at a CUDA libtorch" >&2
  exit 1
fi
echo "[build] building $build_dir with $(nproc) jobs"
cmake --build "$build_dir" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
